// Byte-level BPE (tokenizer.ggml.model = "gpt2": GPT-2, Llama 3, Qwen2,
// SmolLM, StarCoder, Falcon, DeepSeek, MPT, GPT-NeoX, ...).
//
// encode: special tokens are cut out first (SpecialTokenSplitter); each stretch
// of text in between is cut into words by the pre-tokenizer regexes that
// tokenizer.ggml.pre names; each word's bytes are spelled in GPT-2's byte
// alphabet and merged pairwise, best rank (tokenizer.ggml.merges order) first,
// with a priority queue over a linked list of symbols: O(n log n) per word.
// decode: pieces are spelled back from the byte alphabet into bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/pretokenizer.h"
#include "engine/text/tokenizer.h"

namespace minfer {

class BpeTokenizer final : public Tokenizer {
public:
    explicit BpeTokenizer(const GgufVocab& vocab);

    std::vector<int32_t> encode(std::string_view text, bool add_special,
                                bool parse_special = false) const override;

private:
    std::string token_bytes(int32_t id) const override;
    // One word of the pre-tokenizer, already spelled in the byte alphabet.
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;
    int32_t find_token(std::string_view text) const;

    StringIdMap token_ids_;    // piece -> id (the first id, should a piece repeat)
    StringIdMap merge_ranks_;  // "left right" -> rank
    RegexSplitter splitter_;
    bool ignore_merges_ = false;
};

}  // namespace minfer
