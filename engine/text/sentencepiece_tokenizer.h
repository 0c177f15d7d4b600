// The SentencePiece tokenizer of llama-family GGUF files
// (tokenizer.ggml.model = "llama": Llama 2, Mistral, Phi-3, Gemma, Baichuan):
// the file's vocabulary is turned into a sentencepiece ModelProto (BPE: merges
// by piece score, byte fallback) and encoded by libsentencepiece. Decoding is
// done here, piece by piece.
//
// What libsentencepiece cannot express, done here as llama.cpp does: special
// and user-defined tokens are cut out of the text first (SpecialTokenSplitter,
// longest first, each piece of text in between then gets its own dummy-prefix
// space), and a user-defined token spelled with real spaces (Gemma's "  ")
// can still be matched, which sentencepiece, seeing "▁▁", never would.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/text/sentencepiece_proto.h"
#include "engine/text/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace minfer {

// The model a vocabulary becomes, with the fix-ups sentencepiece needs (one
// UNKNOWN piece, unique non-empty pieces). `types` are the token types after
// llama.cpp's fix-ups (analyse_specials). Exposed for tests.
spm::ModelSpec make_spm_model_spec(const GgufVocab& vocab, const std::vector<TokenType>& types,
                                   spm::ModelType model_type);

class SentencePieceTokenizer final : public Tokenizer {
public:
    // model_type is BPE for every llama-style vocabulary; Unigram exists only
    // so that tests can show it would be wrong.
    explicit SentencePieceTokenizer(const GgufVocab& vocab,
                                    spm::ModelType model_type = spm::ModelType::BPE);
    ~SentencePieceTokenizer() override;

    std::vector<int32_t> encode(std::string_view text, bool add_special,
                                bool parse_special = false) const override;

private:
    std::string token_bytes(int32_t id) const override;

    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace minfer
