// /llms.txt (the book's map for language models, llmstxt.org's shape, laid
// out as the seed the book was planned from: ../shared/seed/llms.txt) and
// /llms-full.txt (the whole book as one Markdown document). Links are
// absolute when a base URL is known (the request's Host, or `book build
// --base-url`), site-relative otherwise.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "book/site/book_index.h"

namespace minfer::book {

std::string llms_txt(const Book& book, std::string_view base_url);

// `documents`: (page path, Markdown twin) in reading order.
std::string llms_full_txt(const Book& book, const std::vector<std::pair<std::string, std::string>>& documents,
                          std::string_view base_url);

}  // namespace minfer::book
