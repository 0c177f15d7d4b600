#include "book/site/source_tree.h"

#include "book/site/book_index.h"
#include "book/site/http_util.h"
#include "book/site/run_command.h"

namespace minfer::book {

namespace fs = std::filesystem;

namespace {

// The folders walked when git is not available (a tarball of the repository).
constexpr const char* kSourceFolders[] = {"engine", "kernels", "kvcache", "scheduler", "dist", "server", "cli",
                                          "book",   "tests",   "scripts", "models"};

// A plain file reached without following any symlink: every component from the
// root down must be a real directory or file.
bool is_plain_file_inside(const fs::path& root, const std::string& relative) {
    fs::path p = root;
    std::error_code ec;
    for (const fs::path& part : fs::path(relative)) {
        p /= part;
        const fs::file_status st = fs::symlink_status(p, ec);
        if (ec || fs::is_symlink(st)) return false;
    }
    return fs::is_regular_file(fs::symlink_status(p, ec));
}

std::set<std::string> git_files(const fs::path& root) {
    std::set<std::string> files;
    const auto result = run_command({"git", "-C", root.string(), "ls-files", "-z", "--cached", "--others",
                                     "--exclude-standard"});
    if (!result || result->exit_code != 0) return files;
    std::string_view out = result->out;
    while (!out.empty()) {
        const size_t end = out.find('\0');
        files.emplace(out.substr(0, end));
        if (end == std::string_view::npos) break;
        out.remove_prefix(end + 1);
    }
    return files;
}

std::set<std::string> walked_files(const fs::path& root) {
    std::set<std::string> files;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(root, ec))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.')
            files.insert(e.path().filename().string());
    for (const char* folder : kSourceFolders) {
        if (!fs::is_directory(root / folder)) continue;
        for (auto it = fs::recursive_directory_iterator(root / folder, ec); it != fs::recursive_directory_iterator();
             it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (it->is_directory() && (name[0] == '.' || name == "__pycache__")) {
                it.disable_recursion_pending();
                continue;
            }
            if (it->is_regular_file()) files.insert(fs::relative(it->path(), root).generic_string());
        }
    }
    return files;
}

}  // namespace

SourceTree::SourceTree(fs::path root, std::set<std::string> files) : root_(std::move(root)) {
    for (const std::string& f : files)
        if (is_plain_file_inside(root_, f)) files_.insert(f);
}

SourceTree SourceTree::scan(const fs::path& root) {
    std::set<std::string> files = git_files(root);
    if (files.empty()) files = walked_files(root);
    return SourceTree(root, std::move(files));
}

std::optional<std::string> SourceTree::lookup(std::string_view url_path) const {
    std::optional<std::string> decoded = percent_decode(url_path);
    if (!decoded) return std::nullopt;
    // The set holds only clean relative paths, so an exact match is the whole check;
    // these early refusals just make the intent plain.
    if (decoded->empty() || decoded->front() == '/' || decoded->find('\\') != std::string::npos) return std::nullopt;
    if (!files_.count(*decoded)) return std::nullopt;
    return decoded;
}

std::string SourceTree::read(const std::string& relative) const { return read_text_file(root_ / relative); }

bool looks_like_text(std::string_view bytes) {
    return bytes.size() <= (2u << 20) && bytes.find('\0') == std::string_view::npos;
}

}  // namespace minfer::book
