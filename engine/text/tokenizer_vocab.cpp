#include "engine/text/tokenizer_vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

namespace minfer {

namespace {

// An id key: absent, negative or 0xFFFFFFFF (how some writers spell "none")
// give `fallback` (itself dropped when outside the vocabulary, as llama.cpp does).
int32_t read_token_id(const GGUFFile& file, std::string_view key, size_t n_vocab, int32_t fallback = -1) {
    if (!file.has(key)) return fallback >= 0 && static_cast<size_t>(fallback) < n_vocab ? fallback : -1;
    const int64_t v = file.get_int(key);
    if (v < 0 || v == 0xFFFFFFFFll) return -1;
    if (static_cast<uint64_t>(v) >= n_vocab)
        throw TokenizerError(fmt::format("{} = {} is out of range: the vocabulary has {} tokens", key, v, n_vocab));
    return static_cast<int32_t>(v);
}

std::optional<bool> read_flag(const GGUFFile& file, std::string_view key) {
    if (!file.has(key)) return std::nullopt;
    return file.get_bool(key);
}

// Tokens llama.cpp treats as ending a generation by their text alone
// (llama-vocab.cpp, "maintain a list of tokens that cause end-of-generation").
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>",   "<|end|>",         "<end_of_turn>",      "<|endoftext|>",
    "<|eom_id|>", "<EOT>",        "_<EOT>",          "<|end_of_text|>",    "<end_of_utterance>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",  // DeepSeek's <｜end▁of▁sentence｜>
};

bool is_end_of_generation_text(std::string_view text) {
    return std::find(std::begin(kEndOfGenerationTexts), std::end(kEndOfGenerationTexts), text) !=
           std::end(kEndOfGenerationTexts);
}

std::string lowercase_ascii(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

GgufVocab GgufVocab::from_gguf(const GGUFFile& file) {
    GgufVocab v;
    v.model = file.get_string("tokenizer.ggml.model");
    v.pre = file.get_string_or("tokenizer.ggml.pre", "");
    v.name = file.get_string_or("general.name", "");
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
            throw TokenizerError(fmt::format(
                "tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}", types.size(), n));
        v.types.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            if (types[i] < 0 || types[i] > 6)
                throw TokenizerError(
                    fmt::format("tokenizer.ggml.token_type[{}] = {} is not a token type (0..6)", i, types[i]));
            v.types.push_back(static_cast<TokenType>(types[i]));
        }
    }
    if (file.has("tokenizer.ggml.merges")) v.merges = file.get_string_array("tokenizer.ggml.merges");

    // llama.cpp's default ids per model type (used only when the key is absent).
    int32_t def_unk = -1, def_bos = -1, def_eos = -1, def_sep = -1, def_pad = -1;
    if (v.model == "llama") {
        // Not llama.cpp's unk = 0: make_spm_model_spec finds the unknown piece
        // by type or text, and a vocabulary without one rejects unknown text.
        def_bos = 1, def_eos = 2;
    } else if (v.model == "bert") {
        def_unk = 100, def_bos = 101, def_sep = 102, def_pad = 0;
        def_bos = read_token_id(file, "tokenizer.ggml.cls_token_id", n, def_bos);
    }
    v.unk_id = read_token_id(file, "tokenizer.ggml.unknown_token_id", n, def_unk);
    v.bos_id = read_token_id(file, "tokenizer.ggml.bos_token_id", n, def_bos);
    v.eos_id = read_token_id(file, "tokenizer.ggml.eos_token_id", n, def_eos);
    v.eot_id = read_token_id(file, "tokenizer.ggml.eot_token_id", n);
    v.eom_id = read_token_id(file, "tokenizer.ggml.eom_token_id", n);
    v.sep_id = read_token_id(file, "tokenizer.ggml.seperator_token_id", n, def_sep);  // sic: GGUF's spelling
    v.pad_id = read_token_id(file, "tokenizer.ggml.padding_token_id", n, def_pad);
    v.add_bos = read_flag(file, "tokenizer.ggml.add_bos_token");
    v.add_eos = read_flag(file, "tokenizer.ggml.add_eos_token");
    v.add_sep = read_flag(file, "tokenizer.ggml.add_sep_token");
    v.add_space_prefix = read_flag(file, "tokenizer.ggml.add_space_prefix");
    return v;
}

SpecialTokenSplitter::SpecialTokenSplitter(std::vector<Entry> entries) : entries_(std::move(entries)) {
    std::erase_if(entries_, [](const Entry& e) { return e.text.empty(); });
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
}

// llama.cpp's order: each token in turn, longest first, is cut out of every
// text fragment the longer ones left. (Not leftmost-longest: a long token wins
// over a shorter one that starts earlier and overlaps it.)
std::vector<SpecialTokenSplitter::Fragment> SpecialTokenSplitter::split(std::string_view text,
                                                                        bool parse_special) const {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({-1, text});
    std::vector<Fragment> next;
    const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    for (const Entry& e : entries_) {
        if (!parse_special && !e.always) continue;
        bool found = false;
        next.clear();
        for (const Fragment& f : fragments) {
            if (f.id >= 0) {
                next.push_back(f);
                continue;
            }
            std::string_view rest = f.text;
            for (size_t hit; (hit = rest.find(e.text)) != std::string_view::npos;) {
                found = true;
                std::string_view left = rest.substr(0, hit);
                if (e.lstrip)
                    while (!left.empty() && is_space(left.back())) left.remove_suffix(1);
                if (!left.empty()) next.push_back({-1, left});
                next.push_back({e.id, rest.substr(hit, e.text.size())});
                rest.remove_prefix(hit + e.text.size());
                if (e.rstrip)
                    while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
            }
            if (!rest.empty()) next.push_back({-1, rest});
        }
        if (found) std::swap(fragments, next);
    }
    return fragments;
}

VocabSpecials analyse_specials(const GgufVocab& vocab) {
    const size_t n = vocab.tokens.size();
    VocabSpecials s;
    s.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
        // Type 0 ("undefined") is treated as normal, as llama.cpp does.
        const TokenType t = vocab.type(i);
        s.types[i] = t == TokenType::Undefined ? TokenType::Normal : t;
    }

    // End of generation: the ids the file names, then tokens known by their
    // text. llama.cpp turns such a token into a control token if the file did
    // not, so that it is never matched in text without parse_special.
    std::vector<bool> made_control(n, false);
    for (int32_t id : {vocab.eos_id, vocab.eot_id, vocab.eom_id})
        if (id >= 0 && std::find(s.end_of_generation.begin(), s.end_of_generation.end(), id) ==
                           s.end_of_generation.end())
            s.end_of_generation.push_back(id);
    for (size_t i = 0; i < n; ++i) {
        if (!is_end_of_generation_text(vocab.tokens[i])) continue;
        const auto id = static_cast<int32_t>(i);
        if (std::find(s.end_of_generation.begin(), s.end_of_generation.end(), id) == s.end_of_generation.end())
            s.end_of_generation.push_back(id);
        if (s.types[i] != TokenType::Control) made_control[i] = true;
    }

    // Phi-3 (recognised by general.name, as llama.cpp does): its special tokens
    // swallow the whitespace after them, except <unk>, <s> and <|endoftext|>.
    const std::string name = lowercase_ascii(vocab.name);
    const bool phi3 = name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;

    std::vector<SpecialTokenSplitter::Entry> entries;
    std::unordered_set<std::string_view> seen;
    for (size_t i = 0; i < n; ++i) {
        const TokenType t = s.types[i];
        const bool special = t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown ||
                             made_control[i];
        const std::string& text = vocab.tokens[i];
        if (!special || !seen.insert(text).second) continue;  // a repeated text matches its first id
        SpecialTokenSplitter::Entry e{static_cast<int32_t>(i), text};
        e.always = t == TokenType::UserDefined && !made_control[i];
        if (phi3) e.rstrip = text != "<unk>" && text != "<s>" && text != "<|endoftext|>";
        entries.push_back(std::move(e));
    }
    for (size_t i = 0; i < n; ++i)
        if (made_control[i]) s.types[i] = TokenType::Control;
    s.splitter = SpecialTokenSplitter(std::move(entries));
    return s;
}

}  // namespace minfer
