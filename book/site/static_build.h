// `minfer book build`: the site written out as files any static host can
// serve: each page as DIR/PATH/index.html beside its twin DIR/PATH.md,
// llms.txt, llms-full.txt, the assets, the figures, and a source view for
// every repository text file.
#pragma once

#include <filesystem>
#include <string_view>

#include "book/site/site.h"

namespace minfer::book {

// Returns how many files it wrote; throws BookError if one cannot be written.
size_t write_static_site(const Site& site, const std::filesystem::path& out, std::string_view base_url);

}  // namespace minfer::book
