// Pre-tokenization for byte-level BPE: the text is cut into words by a
// sequence of regexes before any merge, so that no token crosses a word
// boundary. Which regexes a vocabulary wants is named by tokenizer.ggml.pre;
// the table follows llama.cpp's llama-vocab.cpp (the vocab tests' reference).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

// What a tokenizer.ggml.pre name selects.
struct BpePreset {
    // Applied in order: each regex cuts every piece the previous ones left, and
    // the text between two matches is kept as a piece too (llama.cpp's rule).
    // Spelled as llama.cpp spells them (ECMAScript-like), translated for PCRE2.
    std::vector<std::string> regexes;
    // A whole word that is itself a token is taken as is, merges or not (Llama 3).
    bool ignore_merges = false;
    // llama.cpp's add_bos default for this family (the file's flag still wins).
    bool add_bos = false;
};

// The preset for a tokenizer.ggml.pre value ("" when the key is missing gives
// the default, as in llama.cpp). Throws TokenizerError for a name we do not know.
const BpePreset& bpe_preset(std::string_view pre);

// A compiled sequence of regexes (PCRE2, UTF + Unicode properties, JIT when
// available). Thread-safe: split() keeps its scratch state per call.
class RegexSplitter {
public:
    explicit RegexSplitter(const std::vector<std::string>& regexes);
    ~RegexSplitter();
    RegexSplitter(RegexSplitter&&) noexcept;
    RegexSplitter& operator=(RegexSplitter&&) noexcept;

    // The pieces of `text` (valid UTF-8), in order; they concatenate to `text`.
    std::vector<std::string_view> split(std::string_view text) const;

private:
    struct Compiled;
    std::vector<std::unique_ptr<Compiled>> compiled_;
};

// A llama.cpp regex as PCRE2 must see it to match the same: llama.cpp's \s
// covers Unicode White_Space, which also has U+0085 (PCRE2's \s does not).
std::string translate_regex_for_pcre2(std::string_view llama_regex);

}  // namespace minfer
