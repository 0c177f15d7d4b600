#include "engine/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "engine/gguf.h"

namespace minfer {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, a space inside a piece
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // " ⁇ ", as sentencepiece shows <unk>

// An id key: absent, negative or 0xFFFFFFFF (how some writers spell "none") give -1.
int32_t read_token_id(const GGUFFile& file, std::string_view key, size_t n_vocab) {
    if (!file.has(key)) return -1;
    const int64_t v = file.get_int(key);
    if (v < 0 || v == 0xFFFFFFFFll) return -1;
    if (static_cast<uint64_t>(v) >= n_vocab)
        throw TokenizerError(fmt::format("{} = {} is out of range: the vocabulary has {} tokens",
                                         key, v, n_vocab));
    return static_cast<int32_t>(v);
}

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

// Length of the valid UTF-8 sequence at s[i], or 0 if none starts there
// (bad lead byte, truncated, overlong, surrogate, above U+10FFFF).
size_t valid_utf8_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
    const uint8_t c = b(0);
    if (c < 0x80) return 1;
    size_t n;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    if (b(1) < lo || b(1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if (b(k) < 0x80 || b(k) > 0xBF) return 0;
    return n;
}

// Each byte that does not start a valid sequence becomes one U+FFFD. The rule
// is local, so decoding a window of ids gives the same text as decoding them
// within the whole sequence (IncrementalDetokenizer relies on it).
std::string repair_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const size_t n = valid_utf8_length(s, i);
        if (n == 0) {
            out.append(kReplacement);
            i += 1;
        } else {
            out.append(s.substr(i, n));
            i += n;
        }
    }
    return out;
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

SpmVocab SpmVocab::from_gguf(const GGUFFile& file) {
    SpmVocab v;
    v.tokens = file.get_string_array("tokenizer.ggml.tokens");
    const size_t n = v.tokens.size();
    if (n == 0) throw TokenizerError("tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(INT32_MAX))
        throw TokenizerError(fmt::format("tokenizer.ggml.tokens has {} tokens, too many", n));

    if (file.has("tokenizer.ggml.scores")) {
        v.scores = file.get_f32_array("tokenizer.ggml.scores");
        if (v.scores.size() != n)
            throw TokenizerError(fmt::format("tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}",
                                             v.scores.size(), n));
    }
    if (file.has("tokenizer.ggml.token_type")) {
        const std::vector<int64_t> types = file.get_int_array("tokenizer.ggml.token_type");
        if (types.size() != n)
            throw TokenizerError(fmt::format("tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}",
                                             types.size(), n));
        v.types.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            if (types[i] < 0 || types[i] > 6)
                throw TokenizerError(fmt::format("tokenizer.ggml.token_type[{}] = {} is not a token type (0..6)",
                                                 i, types[i]));
            v.types.push_back(static_cast<int32_t>(types[i]));
        }
    }

    v.unk_id = read_token_id(file, "tokenizer.ggml.unknown_token_id", n);
    v.bos_id = read_token_id(file, "tokenizer.ggml.bos_token_id", n);
    v.eos_id = read_token_id(file, "tokenizer.ggml.eos_token_id", n);
    v.pad_id = read_token_id(file, "tokenizer.ggml.padding_token_id", n);
    v.eot_id = read_token_id(file, "tokenizer.ggml.eot_token_id", n);
    v.eom_id = read_token_id(file, "tokenizer.ggml.eom_token_id", n);
    v.add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", true);
    v.add_eos = file.get_bool_or("tokenizer.ggml.add_eos_token", false);
    v.add_space_prefix = file.get_bool_or("tokenizer.ggml.add_space_prefix", true);
    return v;
}

spm::ModelSpec make_spm_model_spec(const SpmVocab& vocab, spm::ModelType model_type) {
    const size_t n = vocab.tokens.size();
    spm::ModelSpec spec;
    spec.model_type = model_type;
    spec.add_dummy_prefix = vocab.add_space_prefix;
    spec.pieces.resize(n);

    std::unordered_set<std::string_view> seen;
    for (size_t i = 0; i < n; ++i) {
        spm::Piece& p = spec.pieces[i];
        p.piece = vocab.tokens[i];
        p.score = vocab.scores.empty() ? 0.0f : vocab.scores[i];
        // GGUF type 0 ("undefined") is treated as normal, as llama.cpp does.
        const int32_t t = vocab.types.empty() ? 1 : vocab.types[i];
        p.type = t == 0 ? spm::PieceType::Normal : static_cast<spm::PieceType>(t);

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

SentencePieceTokenizer::SentencePieceTokenizer(const SpmVocab& vocab, spm::ModelType model_type)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
    const spm::ModelSpec spec = make_spm_model_spec(vocab, model_type);
    const std::string proto = spm::serialize_model_proto(spec);
    const auto status = sp_->LoadFromSerializedProto(absl::string_view(proto.data(), proto.size()));
    if (!status.ok())
        throw TokenizerError("sentencepiece rejected the vocabulary: " + status.ToString());

    pieces_ = vocab.tokens;
    types_.reserve(pieces_.size());
    for (size_t i = 0; i < pieces_.size(); ++i) types_.push_back(spec.pieces[i].type);
    bos_id_ = vocab.bos_id;
    eos_id_ = vocab.eos_id;
    for (int32_t id : {vocab.eos_id, vocab.eot_id, vocab.eom_id}) {
        if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end())
            eog_ids_.push_back(id);
    }
    add_bos_ = vocab.add_bos;
    add_eos_ = vocab.add_eos;
    add_space_prefix_ = vocab.add_space_prefix;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_special) const {
    std::vector<int> pieces;
    const auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &pieces);
    if (!status.ok()) throw TokenizerError("sentencepiece failed to encode the text: " + status.ToString());

    std::vector<int32_t> ids;
    ids.reserve(pieces.size() + 2);
    if (add_special && add_bos_ && bos_id_ >= 0) ids.push_back(bos_id_);
    for (int id : pieces) {
        if (id >= vocab_size())
            throw TokenizerError("the text has a character this vocabulary cannot encode (it has no unknown token)");
        ids.push_back(id);
    }
    if (add_special && add_eos_ && eos_id_ >= 0) ids.push_back(eos_id_);
    return ids;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
    std::string bytes;
    bool first_text = true;
    for (int32_t id : ids) {
        if (id < 0 || id >= vocab_size())
            throw TokenizerError(fmt::format("token id {} is out of range: the vocabulary has {} tokens",
                                             id, vocab_size()));
        const std::string_view piece = pieces_[static_cast<size_t>(id)];
        switch (types_[static_cast<size_t>(id)]) {
            case spm::PieceType::Control:
            case spm::PieceType::Unused:
                break;
            case spm::PieceType::Byte:
                bytes.push_back(static_cast<char>(byte_piece_value(piece)));
                first_text = false;
                break;
            case spm::PieceType::Unknown:
                bytes.append(kUnknownSurface);
                first_text = false;
                break;
            case spm::PieceType::Normal:
            case spm::PieceType::UserDefined:
                // The space the encoder put in front of the text (add_dummy_prefix).
                if (first_text && add_space_prefix_ && piece.starts_with(kSpaceSymbol))
                    append_unescaped(bytes, piece.substr(kSpaceSymbol.size()));
                else
                    append_unescaped(bytes, piece);
                first_text = false;
                break;
        }
    }
    return repair_utf8(bytes);
}

}  // namespace minfer
