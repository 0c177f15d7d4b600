#include "book/site/static_build.h"

#include <fstream>

#include "book/site/html.h"

namespace minfer::book {

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& file, std::string_view body) {
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(body.data(), std::streamsize(body.size()));
    if (!out) throw BookError("cannot write " + file.string());
}

// A page's URL path -> the file a static host serves for it.
fs::path page_file(const fs::path& out, const std::string& path) {
    return path == "/" ? out / "index.html" : out / path.substr(1) / "index.html";
}

}  // namespace

size_t write_static_site(const Site& site, const fs::path& out, std::string_view base_url) {
    size_t written = 0;
    for (const auto& [path, resource] : site.resources()) {
        const bool page = resource.content_type.starts_with("text/html");
        write_file(page ? page_file(out, path) : out / path.substr(1), resource.body);
        ++written;
    }
    write_file(out / "llms.txt", site.llms_txt(base_url));
    write_file(out / "llms-full.txt", site.llms_full_txt(base_url));
    write_file(out / "404.html", site.not_found("/404").body);
    written += 3;
    for (const std::string& file : site.tree().files()) {
        const std::optional<Resource> view = site.source_page(url_encode_path(file));
        if (!view) continue;  // binary files have no source view
        write_file(page_file(out, "/source/" + file), view->body);
        ++written;
    }
    return written;
}

}  // namespace minfer::book
