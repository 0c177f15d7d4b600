// Files the site serves as they are: the theme (book/theme -> /static/), KaTeX
// and highlight.js from the Debian packages (-> /static/katex/,
// /static/highlight/), and the figures (book/figures -> /figures/). They are
// read into memory when the site starts.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::book {

struct Resource {
    std::string body;
    std::string content_type;
};

using ResourceMap = std::map<std::string, Resource>;  // URL path -> resource

// Where libjs-katex and libjs-highlight.js put their files.
inline constexpr const char* kKatexDir = "/usr/share/javascript/katex";
inline constexpr const char* kHighlightDir = "/usr/share/javascript/highlight.js";

// The Content-Type for a file name, from its extension.
std::string content_type_for(std::string_view name);

// Adds the files under `dir` (recursively; symlinked folders are followed, as
// KaTeX's fonts folder is one) at `url_prefix` + their relative path, if
// `keep(relative path)`. A missing folder adds nothing and returns false.
bool add_directory(ResourceMap& out, const std::filesystem::path& dir, const std::string& url_prefix,
                   bool (*keep)(const std::string& relative) = nullptr);

// The ids of the figure modules: book/figures/ID.js with a default export.
std::vector<std::string> figure_module_ids(const std::filesystem::path& figures_dir);

}  // namespace minfer::book
