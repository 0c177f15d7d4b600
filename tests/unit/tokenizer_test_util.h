// What the tokenizer tests share: reading files, llama.cpp's vocabulary test
// cases (format: ../shared/vocab/README.md) and checking a tokenizer on them,
// and loading a model's tokenizer or skipping when the model is missing.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

namespace minfer::tokenizer_test {

inline const std::string kShared = MINFER_SHARED_DIR;
inline const std::string kSource = MINFER_SOURCE_DIR;
inline const std::string kVocab = kShared + "/vocab/ggml-vocab-";

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "cannot open " << path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline bool exists(const std::string& path) { return std::ifstream(path).good(); }

inline std::unique_ptr<Tokenizer> load(const std::string& path) {
    const GGUFFile file = GGUFFile::open(path);
    return Tokenizer::from_gguf(file);
}

// The tokenizer of models/FILE, or null (with a SKIPPED message naming how to
// get it) when the model is not there.
inline std::unique_ptr<Tokenizer> load_model_or_skip(const std::string& file) {
    const std::string path = kSource + "/models/" + file;
    if (!exists(path)) {
        MESSAGE("SKIPPED: " << path << " is missing (scripts/get-model.sh " << file.substr(0, file.rfind('.'))
                            << ")");
        return nullptr;
    }
    return load(path);
}

struct VocabCase {
    std::string text;
    std::vector<int32_t> ids;
};

// llama.cpp's tokenizer tests: NAME.gguf.inp holds the texts, each followed by
// "\n__ggml_vocab_test__\n"; NAME.gguf.out one line of ids per text.
inline std::vector<VocabCase> read_vocab_cases(const std::string& gguf_path) {
    const std::string inp = read_file(gguf_path + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<VocabCase> cases;
    for (size_t pos = 0, hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
        cases.push_back({inp.substr(pos, hit - pos), {}});
    std::istringstream lines(read_file(gguf_path + ".out"));
    std::string line;
    for (auto& c : cases) {
        REQUIRE(std::getline(lines, line));
        std::istringstream nums(line);
        for (int32_t id; nums >> id;) c.ids.push_back(id);
    }
    return cases;
}

inline std::string ids_text(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += " " + std::to_string(id);
    return s;
}

// How many cases the tokenizer gets right; reports the others if asked.
inline int count_passing(const Tokenizer& tok, const std::vector<VocabCase>& cases, bool report) {
    int pass = 0;
    for (const auto& c : cases) {
        const std::vector<int32_t> got = tok.encode(c.text, /*add_special=*/false);
        if (got == c.ids) ++pass;
        else if (report)
            MESSAGE("mismatch for \"" << c.text << "\"\n  got:     " << ids_text(got) << "\n  expected:" << ids_text(c.ids));
    }
    return pass;
}

// Every one of the 46 llama.cpp cases of vocabulary NAME (ggml-vocab-NAME.gguf),
// mismatches reported; the tokenizer, for further checks.
inline std::unique_ptr<Tokenizer> check_vocab_cases(const std::string& name) {
    const std::string path = kVocab + name + ".gguf";
    auto tok = load(path);
    const auto cases = read_vocab_cases(path);
    REQUIRE(cases.size() == 46);
    const int pass = count_passing(*tok, cases, true);
    MESSAGE(name << ": " << pass << "/" << cases.size() << " llama.cpp cases pass");
    CHECK(pass == static_cast<int>(cases.size()));
    return tok;
}

}  // namespace minfer::tokenizer_test
