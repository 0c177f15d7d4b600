#include "engine/text/bpe_tokenizer.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <queue>

#include "engine/text/unicode_text.h"

namespace minfer {

namespace {

// A symbol of the word being merged: a span of it, linked to its neighbours.
struct Symbol {
    uint32_t start;
    uint32_t length;  // 0 once merged into the symbol on its left
    int32_t prev;
    int32_t next;     // -1: none
};

// A candidate merge of two neighbouring symbols.
struct Bigram {
    int32_t rank;
    int32_t left;
    int32_t right;
    uint32_t length;  // of the merged text, to recognise a stale entry
};

// Best rank first, then leftmost: llama.cpp's order, which the references follow.
struct WorseBigram {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

}  // namespace

BpeTokenizer::BpeTokenizer(const GgufVocab& vocab) : splitter_(bpe_preset(vocab.pre).regexes) {
    const BpePreset& preset = bpe_preset(vocab.pre);
    ignore_merges_ = preset.ignore_merges;
    init_common(vocab);
    if (vocab.pre == "chatglm-bpe" || vocab.pre == "glm4") bos_id_ = -1;  // llama.cpp: GLM-4 has no BOS

    token_ids_.reserve(pieces_.size());
    for (size_t i = 0; i < pieces_.size(); ++i) token_ids_.emplace(pieces_[i], static_cast<int32_t>(i));
    merge_ranks_.reserve(vocab.merges.size());
    for (size_t i = 0; i < vocab.merges.size(); ++i) {
        const std::string& m = vocab.merges[i];
        // llama.cpp splits at the first space after the first character; a
        // merge without one can never apply.
        if (m.find(' ', 1) == std::string::npos) continue;
        merge_ranks_.emplace(m, static_cast<int32_t>(i));
    }
    add_bos_ = vocab.add_bos.value_or(preset.add_bos) && bos_id_ >= 0;
    add_eos_ = vocab.add_eos.value_or(false) && eos_id_ >= 0;
}

int32_t BpeTokenizer::find_token(std::string_view text) const {
    const auto it = token_ids_.find(text);
    return it == token_ids_.end() ? -1 : it->second;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 2);
    if (add_special && add_bos_) ids.push_back(bos_id_);
    // The regexes need valid UTF-8; llama.cpp reads each bad byte as U+FFFD too.
    const std::string clean = unicode::repair_utf8(text);
    std::string word;
    for (const auto& fragment : specials_.split(clean, parse_special)) {
        if (fragment.id >= 0) {
            ids.push_back(fragment.id);
            continue;
        }
        for (const std::string_view piece : splitter_.split(fragment.text)) {
            word.clear();
            for (char c : piece) word += unicode::byte_to_symbol(static_cast<uint8_t>(c));
            encode_word(word, ids);
        }
    }
    if (add_special && add_eos_) ids.push_back(eos_id_);
    return ids;
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
        if (const int32_t id = find_token(word); id >= 0) {
            out.push_back(id);
            return;
        }
    }

    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
        size_t n = 0;
        unicode::code_point_at(word, i, &n);
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(n), index - 1, -1});
        if (index > 0) symbols[index - 1].next = index;
        i += n;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, WorseBigram> queue;
    std::string key;  // "left right", the spelling of tokenizer.ggml.merges
    const auto text_of = [&](const Symbol& s) { return word.substr(s.start, s.length); };
    const auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        key.assign(text_of(l));
        key.push_back(' ');
        key.append(text_of(r));
        const auto it = merge_ranks_.find(std::string_view(key));
        if (it == merge_ranks_.end()) return;
        queue.push({it->second, left, right, l.length + r.length});
    };
    for (size_t i = 1; i < symbols.size(); ++i) consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol& l = symbols[static_cast<size_t>(b.left)];
        Symbol& r = symbols[static_cast<size_t>(b.right)];
        // Stale: one side was merged away or grew since this pair was queued.
        if (l.length == 0 || r.length == 0 || l.next != b.right || l.length + r.length != b.length) continue;
        l.length += r.length;
        r.length = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = b.left;
        consider(l.prev, b.left);
        consider(b.left, l.next);
    }

    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
        const std::string_view text = text_of(symbols[static_cast<size_t>(i)]);
        if (const int32_t id = find_token(text); id >= 0) {
            out.push_back(id);
            continue;
        }
        // No such token (a vocabulary without all 256 byte symbols): llama.cpp
        // then looks up each byte of the symbol's spelling on its own and keeps
        // the ones it finds.
        for (char c : text)
            if (const int32_t id = find_token(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
    const std::string& piece = pieces_[static_cast<size_t>(id)];
    switch (types_[static_cast<size_t>(id)]) {
        case TokenType::Normal:
        case TokenType::Undefined:
            break;
        case TokenType::Byte:
            // A byte-fallback piece <0xAB>, if the vocabulary has them.
            if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>' &&
                std::isxdigit(static_cast<unsigned char>(piece[3])) && std::isxdigit(static_cast<unsigned char>(piece[4])))
                return std::string(1, static_cast<char>(std::strtol(piece.substr(3, 2).c_str(), nullptr, 16)));
            return piece;
        default:  // user-defined, control, unknown: stored as plain text
            return piece;
    }
    // A normal piece is spelled in the byte alphabet. A character outside it
    // (a vocabulary bug) is kept as its own UTF-8, where llama.cpp writes
    // "[UNK_BYTE_0x...]".
    std::string bytes;
    bytes.reserve(piece.size());
    if (!unicode::is_valid_utf8(piece)) return piece;
    for (size_t i = 0, n = 0; i < piece.size(); i += n) {
        const char32_t cp = unicode::code_point_at(piece, i, &n);
        const int b = unicode::symbol_to_byte(cp);
        if (b >= 0) bytes.push_back(static_cast<char>(b));
        else bytes.append(piece, i, n);
    }
    return bytes;
}

}  // namespace minfer
