// The SentencePiece tokenizer of llama-family GGUF files
// (tokenizer.ggml.model = "llama"): the file's vocabulary is turned into a
// sentencepiece ModelProto (BPE: merges by piece score, byte fallback) and
// encoded by libsentencepiece. Decoding is done here, piece by piece.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sentencepiece_proto.h"
#include "engine/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace minfer {

// The tokenizer.ggml.* metadata of a SentencePiece vocabulary, as the file has it.
struct SpmVocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;    // empty: all zero
    std::vector<int32_t> types;   // GGUF token types; empty: all normal
    int32_t unk_id = -1;          // -1: the file names none
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t pad_id = -1;
    int32_t eot_id = -1;
    int32_t eom_id = -1;
    bool add_bos = true;
    bool add_eos = false;
    bool add_space_prefix = true;

    // Reads and range-checks the keys; throws TokenizerError naming the key.
    static SpmVocab from_gguf(const GGUFFile& file);
};

// The model a vocabulary becomes, with the fix-ups sentencepiece needs (one
// UNKNOWN piece, unique non-empty pieces). Exposed for tests.
spm::ModelSpec make_spm_model_spec(const SpmVocab& vocab, spm::ModelType model_type);

class SentencePieceTokenizer final : public Tokenizer {
public:
    // model_type is BPE for every llama-style vocabulary; Unigram exists only
    // so that tests can show it would be wrong.
    explicit SentencePieceTokenizer(const SpmVocab& vocab,
                                    spm::ModelType model_type = spm::ModelType::BPE);
    ~SentencePieceTokenizer() override;

    std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
    std::string decode(std::span<const int32_t> ids) const override;

private:
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    std::vector<spm::PieceType> types_;  // after the fix-ups, by id
    bool add_bos_ = true;
    bool add_eos_ = false;
    bool add_space_prefix_ = true;
};

}  // namespace minfer
