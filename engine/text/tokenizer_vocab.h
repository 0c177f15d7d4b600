// What every GGUF tokenizer shares: the tokenizer.ggml.* metadata as the
// file has it, and the matching of special and user-defined token texts that
// runs before any model-specific tokenization (llama.cpp's
// tokenizer_st_partition, which the vocab tests' reference outputs come from).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace minfer {

class GGUFFile;

// A map from token text to a number (an id, a merge rank) that the tokenizers
// look up by string_view, without building a std::string per lookup.
struct TransparentStringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>>;

// tokenizer.ggml.token_type; sentencepiece's piece types use the same numbers.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

struct GgufVocab {
    std::string model;  // tokenizer.ggml.model: "llama", "gpt2", "bert"
    std::string pre;    // tokenizer.ggml.pre; "" when absent
    std::string name;   // general.name (llama.cpp keys a few quirks on it)
    std::vector<std::string> tokens;
    std::vector<float> scores;       // empty: all zero
    std::vector<TokenType> types;    // empty: all normal
    std::vector<std::string> merges; // byte-level BPE: "left right", best first

    // -1: none. Absent keys take llama.cpp's defaults for the model type
    // (SentencePiece: BOS 1, EOS 2; BERT: unk 100, CLS 101, SEP 102).
    int32_t unk_id = -1;
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t eot_id = -1;
    int32_t eom_id = -1;
    int32_t sep_id = -1;
    int32_t pad_id = -1;

    // The flags as the file has them; absent: the tokenizer's own default.
    std::optional<bool> add_bos;
    std::optional<bool> add_eos;
    std::optional<bool> add_sep;
    std::optional<bool> add_space_prefix;

    // Reads and range-checks the keys; throws TokenizerError naming the key.
    static GgufVocab from_gguf(const GGUFFile& file);

    TokenType type(size_t id) const { return types.empty() ? TokenType::Normal : types[id]; }
};

// Token texts matched in the text before tokenizing it, longest first.
// Control and unknown tokens are matched only when the caller asks
// (parse_special); user-defined ones always, as llama.cpp and HF do.
class SpecialTokenSplitter {
public:
    struct Entry {
        int32_t id;
        std::string text;
        bool always = false;  // user-defined: matched even without parse_special
        bool lstrip = false;  // eats the whitespace before it
        bool rstrip = false;  // eats the whitespace after it
    };
    struct Fragment {
        int32_t id;             // >= 0: the token matched here; -1: text to tokenize
        std::string_view text;  // the text (for a token: its text in the input)
    };

    SpecialTokenSplitter() = default;
    explicit SpecialTokenSplitter(std::vector<Entry> entries);

    std::vector<Fragment> split(std::string_view text, bool parse_special) const;
    bool empty() const { return entries_.empty(); }

private:
    std::vector<Entry> entries_;  // longest text first
};

// Shared set-up that llama.cpp applies to every vocabulary: which tokens
// end a generation (EOS, EOT, EOM and tokens like <|im_end|> recognised by
// their text, which become control tokens), and the special-token entries.
struct VocabSpecials {
    std::vector<TokenType> types;       // the file's, with llama.cpp's fix-ups
    std::vector<int32_t> end_of_generation;
    SpecialTokenSplitter splitter;
};
VocabSpecials analyse_specials(const GgufVocab& vocab);

}  // namespace minfer
