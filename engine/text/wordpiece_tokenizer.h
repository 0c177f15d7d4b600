// WordPiece (tokenizer.ggml.model = "bert": BERT, BGE and other embedding
// models), as llama.cpp runs it on GGUF vocabularies, where a word-initial
// piece is spelled "▁word" and a continuation "ing" (BERT's "##ing").
//
// encode: the text is normalised like BERT uncased (NFD, accents dropped,
// lowercase, control characters dropped), cut at whitespace, and every
// punctuation mark, ASCII symbol and CJK ideograph becomes a word of its own;
// each word is then covered greedily by the longest pieces from its start.
// A word that cannot be covered becomes [UNK] as a whole.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/tokenizer.h"

namespace minfer {

class WordPieceTokenizer final : public Tokenizer {
public:
    explicit WordPieceTokenizer(const GgufVocab& vocab);

    std::vector<int32_t> encode(std::string_view text, bool add_special,
                                bool parse_special = false) const override;

    // The normalised words of `text` (exposed for tests).
    static std::vector<std::string> split_words(std::string_view text);

private:
    std::string token_bytes(int32_t id) const override;
    void encode_word(const std::string& word, std::vector<int32_t>& out) const;

    StringIdMap token_ids_;
    size_t max_token_bytes_ = 0;
    int32_t unk_id_ = -1;
    int32_t sep_id_ = -1;
    bool add_sep_ = true;
};

}  // namespace minfer
