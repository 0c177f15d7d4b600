// The repository files the book may show at /source/PATH, and nothing else.
// The set is fixed when the site starts: the files git knows (tracked, or new
// and not ignored, so build outputs never appear), or, without git, a walk of
// the source folders. A request path is checked against this set after
// decoding, so traversal tricks (.., %2e%2e, //, \, NUL), .git and build
// outputs simply are not in it. Symlinks are left out when the set is made.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace minfer::book {

class SourceTree {
public:
    SourceTree(std::filesystem::path root, std::set<std::string> files);

    // Lists the files under `root` (see above).
    static SourceTree scan(const std::filesystem::path& root);

    // The repository-relative path that `url_path` (the part after /source/,
    // still percent-encoded) names, if it is one of the files.
    std::optional<std::string> lookup(std::string_view url_path) const;
    bool contains(const std::string& relative) const { return files_.count(relative) > 0; }
    // The file's bytes; throws BookError if it cannot be read.
    std::string read(const std::string& relative) const;

    const std::set<std::string>& files() const { return files_; }
    const std::filesystem::path& root() const { return root_; }

private:
    std::filesystem::path root_;
    std::set<std::string> files_;
};

// True for text a browser can show (no NUL bytes, not huge).
bool looks_like_text(std::string_view bytes);

}  // namespace minfer::book
