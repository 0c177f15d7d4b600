// A SentencePiece model (the `ModelProto` message of sentencepiece_model.proto),
// serialized by hand: Debian's libsentencepiece ships no generated protobuf
// header, but SentencePieceProcessor::LoadFromSerializedProto takes the bytes.
//
// Only the fields a GGUF vocabulary needs are written; everything else keeps
// its proto default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/tokenizer_vocab.h"

namespace minfer::spm {

// ModelProto.SentencePiece.Type: the numbers of GGUF's tokenizer.ggml.token_type
// (TokenType), which were taken from it (Undefined, 0, is not a piece type).
using PieceType = TokenType;

// TrainerSpec.ModelType.
enum class ModelType : int32_t {
    Unigram = 1,
    BPE = 2,
};

struct Piece {
    std::string piece;  // never empty; U+2581 stands for a space
    float score = 0.0f;
    PieceType type = PieceType::Normal;
};

struct ModelSpec {
    std::vector<Piece> pieces;  // the id of a piece is its index

    // trainer_spec
    ModelType model_type = ModelType::BPE;
    bool byte_fallback = false;
    int32_t unk_id = 0;  // -1: none (for the ids below as well)
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t pad_id = -1;

    // normalizer_spec: no precompiled charsmap, so the text is not normalized.
    std::string normalizer_name = "identity";
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = false;  // written explicitly: the proto default is true
    bool escape_whitespaces = true;
};

// The serialized ModelProto.
std::string serialize_model_proto(const ModelSpec& spec);

}  // namespace minfer::spm
