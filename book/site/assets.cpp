#include "book/site/assets.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "book/site/book_index.h"

namespace minfer::book {

namespace fs = std::filesystem;

std::string content_type_for(std::string_view name) {
    static const std::pair<const char*, const char*> kTypes[] = {
        {".html", "text/html; charset=utf-8"},   {".css", "text/css; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"}, {".mjs", "text/javascript; charset=utf-8"},
        {".json", "application/json"},          {".md", "text/markdown; charset=utf-8"},
        {".txt", "text/plain; charset=utf-8"},  {".csv", "text/csv; charset=utf-8"},
        {".svg", "image/svg+xml"},              {".png", "image/png"},
        {".jpg", "image/jpeg"},                 {".woff2", "font/woff2"},
        {".woff", "font/woff"},                 {".ttf", "font/ttf"},
    };
    for (const auto& [ext, type] : kTypes)
        if (name.ends_with(ext)) return type;
    return "application/octet-stream";
}

bool add_directory(ResourceMap& out, const fs::path& dir, const std::string& url_prefix,
                   bool (*keep)(const std::string& relative)) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return false;
    const auto options = fs::directory_options::follow_directory_symlink;
    for (auto it = fs::recursive_directory_iterator(dir, options, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (!it->is_regular_file()) continue;
        // lexically: fs::relative would resolve the symlinks (katex.min.js -> katex.js).
        const std::string relative = it->path().lexically_relative(dir).generic_string();
        if (keep && !keep(relative)) continue;
        std::ifstream in(it->path(), std::ios::binary);
        if (!in) throw BookError("cannot read " + it->path().string());
        std::ostringstream s;
        s << in.rdbuf();
        out[url_prefix + relative] = Resource{s.str(), content_type_for(relative)};
    }
    return true;
}

std::vector<std::string> figure_module_ids(const fs::path& figures_dir) {
    std::vector<std::string> ids;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(figures_dir, ec)) {
        if (!e.is_regular_file() || e.path().extension() != ".js") continue;
        // A figure has a default export (mount); shared helpers (kit.js) have none.
        std::ifstream in(e.path());
        std::ostringstream s;
        s << in.rdbuf();
        if (s.str().find("export default") != std::string::npos) ids.push_back(e.path().stem().string());
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

}  // namespace minfer::book
