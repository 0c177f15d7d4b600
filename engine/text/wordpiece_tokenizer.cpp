#include "engine/text/wordpiece_tokenizer.h"

#include <algorithm>

#include "engine/text/unicode_text.h"

namespace minfer {

namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581: how the GGUF spells a word-initial piece

// CJK ideographs, each a word of its own (BERT's _is_chinese_char, with the
// range HF's Rust code has: 0x2B920, not 0x2B820).
bool is_cjk_ideograph(char32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(const GgufVocab& vocab) {
    init_common(vocab);
    token_ids_.reserve(pieces_.size());
    for (size_t i = 0; i < pieces_.size(); ++i) {
        token_ids_.emplace(pieces_[i], static_cast<int32_t>(i));
        max_token_bytes_ = std::max(max_token_bytes_, pieces_[i].size());
    }
    unk_id_ = vocab.unk_id;
    sep_id_ = vocab.sep_id;
    add_bos_ = vocab.add_bos.value_or(true) && bos_id_ >= 0;  // [CLS]
    add_sep_ = vocab.add_sep.value_or(true) && sep_id_ >= 0;  // [SEP]
    add_eos_ = vocab.add_eos.value_or(false) && eos_id_ >= 0;
    strip_leading_space_ = true;  // the "▁" of the first word
}

std::vector<std::string> WordPieceTokenizer::split_words(std::string_view text) {
    const std::string decomposed = unicode::nfd(unicode::repair_utf8(text));
    std::vector<std::string> words(1);
    const auto end_word = [&] {
        if (!words.back().empty()) words.emplace_back();
    };
    for (const char32_t cp : unicode::code_points(decomposed)) {
        if (unicode::is_white_space(cp)) {
            end_word();
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || unicode::is_control(cp) || unicode::is_mark(cp)) continue;
        std::string s;
        unicode::append_utf8(s, unicode::to_lower(cp));
        if (unicode::is_punctuation(cp) || (cp < 0x7F && unicode::is_symbol(cp)) || is_cjk_ideograph(cp)) {
            end_word();
            words.back() = std::move(s);
            words.emplace_back();
        } else {
            words.back() += s;
        }
    }
    if (words.back().empty()) words.pop_back();
    return words;
}

void WordPieceTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
    std::string spelled;
    spelled.reserve(kWordStart.size() + word.size());
    spelled.append(kWordStart).append(word);
    const size_t n = spelled.size();
    const size_t first = out.size();
    for (size_t i = 0; i < n;) {
        // The longest piece that starts here (byte lengths, as llama.cpp; a
        // piece is whole UTF-8, so only whole characters ever match).
        size_t matched = 0;
        for (size_t j = std::min(n, i + max_token_bytes_); j > i; --j) {
            const auto it = token_ids_.find(std::string_view(spelled).substr(i, j - i));
            if (it != token_ids_.end()) {
                out.push_back(it->second);
                matched = j - i;
                break;
            }
        }
        if (matched == 0) {  // the word cannot be covered: it is unknown as a whole
            out.resize(first);
            break;
        }
        i += matched;
    }
    if (out.size() == first && unk_id_ >= 0) out.push_back(unk_id_);
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> ids;
    if (add_special && add_bos_) ids.push_back(bos_id_);
    for (const auto& fragment : specials_.split(text, parse_special)) {
        if (fragment.id >= 0) {
            ids.push_back(fragment.id);
            continue;
        }
        for (const std::string& word : split_words(fragment.text)) encode_word(word, ids);
    }
    if (add_special && add_sep_) ids.push_back(sep_id_);
    if (add_special && add_eos_) ids.push_back(eos_id_);
    return ids;
}

std::string WordPieceTokenizer::token_bytes(int32_t id) const {
    const std::string& piece = pieces_[static_cast<size_t>(id)];
    if (types_[static_cast<size_t>(id)] != TokenType::Normal || !piece.starts_with(kWordStart)) return piece;
    std::string text(1, ' ');
    text.append(piece, kWordStart.size());
    return text;
}

}  // namespace minfer
