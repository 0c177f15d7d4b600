// The whole site in memory: every page rendered once at start (so a broken
// link stops the site from starting), each with its Markdown twin, plus the
// static assets and figures. Source views and llms.txt are made per request
// (they depend on the file asked for, or on the Host).
#pragma once

#include <boost/json/array.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "book/site/assets.h"
#include "book/site/book_index.h"
#include "book/site/page_layout.h"
#include "book/site/source_tree.h"

namespace minfer::book {

struct BookPage;

class Site {
public:
    // Renders the book; throws BookError naming the page and the link or block
    // that is broken.
    Site(const Book& book, const SourceTree& tree);

    // A page (/chapters/x), its twin (/chapters/x.md), or an asset; nullptr if none.
    const Resource* find(const std::string& path) const;
    // The source view for /source/<encoded_path>; nullopt unless it names a
    // repository text file.
    std::optional<Resource> source_page(std::string_view encoded_path) const;
    std::string llms_txt(std::string_view base_url) const;
    std::string llms_full_txt(std::string_view base_url) const;
    // The 404 answer: a page, or Markdown when the path asks for .md.
    Resource not_found(std::string_view path) const;

    const ResourceMap& resources() const { return resources_; }
    const SourceTree& tree() const { return tree_; }

private:
    void add_page(const BookPage& page, bool in_full_text);

    const Book& book_;
    const SourceTree& tree_;
    std::unique_ptr<PageLayout> layout_;
    ResourceMap resources_;
    std::vector<std::pair<std::string, std::string>> documents_;  // (path, twin) for llms-full.txt
    boost::json::array search_index_;  // /search-index.json: {url, title, text} of the same pages
};

}  // namespace minfer::book
