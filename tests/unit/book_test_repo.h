// A throwaway repository for the book's tests: files written under the temp
// directory on construction, all of it removed on destruction.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>

namespace minfer::book_test {

struct TempRepo {
    std::filesystem::path root;
    // name_pid/PATH holds TEXT, for each {PATH, TEXT}.
    TempRepo(const std::string& name, std::initializer_list<std::pair<const char*, const char*>> files) {
        root = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
        for (const auto& [path, text] : files) {
            std::filesystem::create_directories((root / path).parent_path());
            std::ofstream(root / path) << text;
        }
    }
    ~TempRepo() { std::filesystem::remove_all(root); }
    TempRepo(const TempRepo&) = delete;
    TempRepo& operator=(const TempRepo&) = delete;
};

}  // namespace minfer::book_test
