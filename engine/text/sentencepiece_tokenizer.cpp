#include "engine/text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "engine/gguf/gguf.h"
#include "engine/text/unicode_text.h"

namespace minfer {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, a space inside a piece
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // " ⁇ ", as sentencepiece shows <unk>

// "<0xAB>" -> 0xAB, the only spelling sentencepiece accepts for a BYTE piece; -1 otherwise.
int byte_piece_value(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
    int v = 0;
    for (char c : piece.substr(3, 2)) {
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

void append_unescaped(std::string& out, std::string_view piece) {
    for (size_t pos = 0;;) {
        const size_t hit = piece.find(kSpaceSymbol, pos);
        if (hit == std::string_view::npos) {
            out.append(piece.substr(pos));
            return;
        }
        out.append(piece.substr(pos, hit - pos));
        out.push_back(' ');
        pos = hit + kSpaceSymbol.size();
    }
}

}  // namespace

spm::ModelSpec make_spm_model_spec(const GgufVocab& vocab, const std::vector<TokenType>& types,
                                   spm::ModelType model_type) {
    const size_t n = vocab.tokens.size();
    spm::ModelSpec spec;
    spec.model_type = model_type;
    spec.add_dummy_prefix = vocab.add_space_prefix.value_or(true);
    spec.pieces.resize(n);

    std::unordered_set<std::string_view> seen;
    for (size_t i = 0; i < n; ++i) {
        spm::Piece& p = spec.pieces[i];
        p.piece = vocab.tokens[i];
        p.score = vocab.scores.empty() ? 0.0f : vocab.scores[i];
        p.type = static_cast<spm::PieceType>(types[i]);

        if (p.type == spm::PieceType::Byte) {
            if (byte_piece_value(p.piece) < 0)
                throw TokenizerError(fmt::format(
                    "tokenizer.ggml.tokens[{}] = '{}' has type byte but is not spelled <0xXX>", i, p.piece));
            spec.byte_fallback = true;
        }
        // sentencepiece refuses empty and repeated pieces. Such an id can never
        // come out of the text anyway (only the first of equal pieces can), so
        // it keeps its place under a private name and is never produced.
        if (p.piece.empty() || !seen.insert(vocab.tokens[i]).second) {
            p.piece = fmt::format("<minfer:unused:{}>", i);
            p.type = spm::PieceType::Unused;
        }
    }

    // sentencepiece wants exactly one UNKNOWN piece. Files differ: Phi-3 marks
    // its <unk> as control and 53 padding pieces as unknown. The id the file
    // names wins, then the first piece typed unknown, then a piece called <unk>.
    int32_t unk = vocab.unk_id;
    for (size_t i = 0; i < n && unk < 0; ++i)
        if (spec.pieces[i].type == spm::PieceType::Unknown) unk = static_cast<int32_t>(i);
    for (size_t i = 0; i < n && unk < 0; ++i)
        if (spec.pieces[i].piece == "<unk>") unk = static_cast<int32_t>(i);
    for (size_t i = 0; i < n; ++i) {
        // Control pieces are never matched in text, as with llama.cpp's parse_special = false.
        if (spec.pieces[i].type == spm::PieceType::Unknown) spec.pieces[i].type = spm::PieceType::Control;
    }
    if (unk < 0) {
        // No unknown piece at all: add one past the vocabulary; encode() rejects
        // text that would need it.
        unk = static_cast<int32_t>(n);
        spec.pieces.push_back({"<minfer:unk>", 0.0f, spm::PieceType::Unknown});
    }
    spec.pieces[static_cast<size_t>(unk)].type = spm::PieceType::Unknown;

    spec.unk_id = unk;
    spec.bos_id = vocab.bos_id;
    spec.eos_id = vocab.eos_id;
    spec.pad_id = vocab.pad_id;
    return spec;
}

SentencePieceTokenizer::SentencePieceTokenizer(const GgufVocab& vocab, spm::ModelType model_type)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    init_common(vocab);
    const spm::ModelSpec spec = make_spm_model_spec(vocab, types_, model_type);
    const std::string proto = spm::serialize_model_proto(spec);
    const auto status = sp_->LoadFromSerializedProto(absl::string_view(proto.data(), proto.size()));
    if (!status.ok())
        throw TokenizerError("sentencepiece rejected the vocabulary: " + status.ToString());

    // Decoding follows the model's pieces, with the fix-ups (an unusable
    // duplicate decodes to nothing, the unknown piece as sentencepiece shows it).
    for (size_t i = 0; i < pieces_.size(); ++i) types_[i] = static_cast<TokenType>(spec.pieces[i].type);
    add_bos_ = vocab.add_bos.value_or(true);
    add_eos_ = vocab.add_eos.value_or(false);
    strip_leading_space_ = spec.add_dummy_prefix;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_special,
                                                    bool parse_special) const {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 2 + 2);
    if (add_special && add_bos_ && bos_id_ >= 0) ids.push_back(bos_id_);
    std::vector<int> pieces;
    // Every stretch of text between special tokens is encoded on its own, so
    // each gets the dummy-prefix space (llama.cpp: "prefix with space if
    // previous is special").
    for (const auto& fragment : specials_.split(text, parse_special)) {
        if (fragment.id >= 0) {
            ids.push_back(fragment.id);
            continue;
        }
        const auto status = sp_->Encode(absl::string_view(fragment.text.data(), fragment.text.size()), &pieces);
        if (!status.ok()) throw TokenizerError("sentencepiece failed to encode the text: " + status.ToString());
        for (int id : pieces) {
            if (id >= vocab_size())
                throw TokenizerError("the text has a character this vocabulary cannot encode (it has no unknown token)");
            ids.push_back(id);
        }
    }
    if (add_special && add_eos_ && eos_id_ >= 0) ids.push_back(eos_id_);
    return ids;
}

std::string SentencePieceTokenizer::token_bytes(int32_t id) const {
    const std::string_view piece = pieces_[static_cast<size_t>(id)];
    switch (types_[static_cast<size_t>(id)]) {
        case TokenType::Byte:
            return std::string(1, static_cast<char>(byte_piece_value(piece)));
        case TokenType::Unknown:
            return std::string(kUnknownSurface);
        case TokenType::Control:
        case TokenType::Unused:
            return {};
        default: {
            std::string out;
            append_unescaped(out, piece);
            return out;
        }
    }
}

}  // namespace minfer
