#include "engine/text/sentencepiece_proto.h"

#include <bit>
#include <string_view>

namespace minfer::spm {

namespace {

// Field numbers from sentencepiece_model.proto.
namespace model_proto {
constexpr uint32_t kPieces = 1;
constexpr uint32_t kTrainerSpec = 2;
constexpr uint32_t kNormalizerSpec = 3;
}  // namespace model_proto

namespace sentence_piece {
constexpr uint32_t kPiece = 1;
constexpr uint32_t kScore = 2;
constexpr uint32_t kType = 3;
}  // namespace sentence_piece

// A special token is written as two fields: its id and its piece.
struct SpecialFields {
    uint32_t id;
    uint32_t piece;
};

namespace trainer_spec {
constexpr uint32_t kModelType = 3;
constexpr uint32_t kVocabSize = 4;
constexpr uint32_t kByteFallback = 35;
constexpr SpecialFields kUnk{.id = 40, .piece = 45};
constexpr SpecialFields kBos{.id = 41, .piece = 46};
constexpr SpecialFields kEos{.id = 42, .piece = 47};
constexpr SpecialFields kPad{.id = 43, .piece = 48};
}  // namespace trainer_spec

namespace normalizer_spec {
constexpr uint32_t kName = 1;
constexpr uint32_t kAddDummyPrefix = 3;
constexpr uint32_t kRemoveExtraWhitespaces = 4;
constexpr uint32_t kEscapeWhitespaces = 5;
}  // namespace normalizer_spec

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// Appends protobuf wire-format fields to a byte string.
class ProtoWriter {
public:
    void varint_field(uint32_t field, uint64_t v) {
        key(field, kVarint);
        varint(v);
    }
    // int32 fields are sign-extended to 64 bits, so -1 takes ten bytes.
    void int32_field(uint32_t field, int32_t v) {
        varint_field(field, static_cast<uint64_t>(static_cast<int64_t>(v)));
    }
    void bool_field(uint32_t field, bool v) { varint_field(field, v ? 1 : 0); }
    void float_field(uint32_t field, float v) {
        key(field, kFixed32);
        const uint32_t bits = std::bit_cast<uint32_t>(v);
        for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
    }
    // Strings, bytes and embedded messages.
    void bytes_field(uint32_t field, std::string_view bytes) {
        key(field, kLengthDelimited);
        varint(bytes.size());
        out_.append(bytes);
    }

    const std::string& bytes() const { return out_; }

private:
    void key(uint32_t field, uint32_t wire_type) { varint((uint64_t{field} << 3) | wire_type); }
    void varint(uint64_t v) {
        while (v >= 0x80) {
            out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
            v >>= 7;
        }
        out_.push_back(static_cast<char>(v));
    }

    std::string out_;
};

// The piece of a special id, for the *_piece fields (sentencepiece looks the
// special tokens up by piece, not by id).
void write_special(ProtoWriter& w, const ModelSpec& spec, int32_t id, SpecialFields fields) {
    w.int32_field(fields.id, id);
    if (id >= 0 && static_cast<size_t>(id) < spec.pieces.size())
        w.bytes_field(fields.piece, spec.pieces[static_cast<size_t>(id)].piece);
}

}  // namespace

std::string serialize_model_proto(const ModelSpec& spec) {
    ProtoWriter model;

    for (const Piece& p : spec.pieces) {
        ProtoWriter piece;
        piece.bytes_field(sentence_piece::kPiece, p.piece);
        piece.float_field(sentence_piece::kScore, p.score);
        piece.varint_field(sentence_piece::kType, static_cast<uint64_t>(p.type));
        model.bytes_field(model_proto::kPieces, piece.bytes());
    }

    ProtoWriter trainer;
    trainer.varint_field(trainer_spec::kModelType, static_cast<uint64_t>(spec.model_type));
    trainer.int32_field(trainer_spec::kVocabSize, static_cast<int32_t>(spec.pieces.size()));
    trainer.bool_field(trainer_spec::kByteFallback, spec.byte_fallback);
    write_special(trainer, spec, spec.unk_id, trainer_spec::kUnk);
    write_special(trainer, spec, spec.bos_id, trainer_spec::kBos);
    write_special(trainer, spec, spec.eos_id, trainer_spec::kEos);
    write_special(trainer, spec, spec.pad_id, trainer_spec::kPad);
    model.bytes_field(model_proto::kTrainerSpec, trainer.bytes());

    ProtoWriter normalizer;
    normalizer.bytes_field(normalizer_spec::kName, spec.normalizer_name);
    normalizer.bool_field(normalizer_spec::kAddDummyPrefix, spec.add_dummy_prefix);
    normalizer.bool_field(normalizer_spec::kRemoveExtraWhitespaces, spec.remove_extra_whitespaces);
    normalizer.bool_field(normalizer_spec::kEscapeWhitespaces, spec.escape_whitespaces);
    model.bytes_field(model_proto::kNormalizerSpec, normalizer.bytes());

    return model.bytes();
}

}  // namespace minfer::spm
