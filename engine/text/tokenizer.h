// Tokenizers built from a GGUF file's `tokenizer.ggml.*` metadata:
//
//   tokenizer.ggml.model = "llama"  SentencePiece BPE (sentencepiece_tokenizer.h)
//   tokenizer.ggml.model = "gpt2"   byte-level BPE with a pre-tokenizer named by
//                                   tokenizer.ggml.pre (bpe_tokenizer.h)
//   tokenizer.ggml.model = "bert"   WordPiece (wordpiece_tokenizer.h)
//
// Each one reproduces llama.cpp's tokenizer for the same file (the reference
// of the vocab tests in ../shared/vocab).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/tokenizer_vocab.h"

namespace minfer {

class GGUFFile;

struct TokenizerError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    // Builds the tokenizer the file names; throws TokenizerError for a model we
    // do not support or an inconsistent vocabulary. Works on vocab-only files.
    static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& file);

    // Text to ids. With add_special, BOS (and EOS, BERT's SEP) are added as the
    // file's add_bos_token / add_eos_token flags say; without, none at all.
    // With parse_special, the texts of control tokens (`<|im_start|>`, `<s>`)
    // in `text` become those tokens; without, they are tokenized as plain text.
    // User-defined tokens are always matched whole. Byte-level BPE and
    // WordPiece read each byte of invalid UTF-8 as U+FFFD (as llama.cpp does);
    // SentencePiece hands the bytes to libsentencepiece as they are.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                        bool parse_special = false) const = 0;

    // Ids to text, one rule for every tokenizer: control and unused tokens
    // make no text; byte tokens are joined into UTF-8 (a byte that does not
    // complete a character becomes U+FFFD); user-defined tokens give their
    // text; where the encoder adds a space in front of the text (SentencePiece
    // with add_space_prefix, WordPiece) the first piece's leading space is
    // removed. No other clean-up: decode(encode(x)) == x for byte-level BPE.
    virtual std::string decode(std::span<const int32_t> ids) const;

    // One token's text as a chat template writes it: control tokens as their
    // text (`<|im_end|>`), others as decode() renders them without the
    // leading-space rule (may be part of a UTF-8 character).
    std::string token_to_piece(int32_t id) const;

    int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
    // The token as the vocabulary spells it ("▁Hello", "Ġworld", "<0x0A>").
    const std::string& piece(int32_t id) const { return pieces_.at(static_cast<size_t>(id)); }
    TokenType token_type(int32_t id) const { return types_.at(static_cast<size_t>(id)); }
    int32_t bos_id() const { return bos_id_; }  // -1 if none
    int32_t eos_id() const { return eos_id_; }  // -1 if none
    // Ids that end a generation: EOS first, then EOT/EOM when the file names
    // them, then tokens llama.cpp recognises by their text (<|im_end|>,
    // <|eot_id|>, <|endoftext|>, <end_of_turn>, <|end|>, ...).
    const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }

protected:
    // Pieces, types, special ids, end-of-generation ids and the special-token
    // splitter from the file's metadata.
    void init_common(const GgufVocab& vocab);
    // The bytes one token contributes to decode()'s output (before the
    // leading-space rule and the UTF-8 repair). Default: the piece itself.
    virtual std::string token_bytes(int32_t id) const;
    void check_id(int32_t id) const;

    std::vector<std::string> pieces_;
    std::vector<TokenType> types_;
    int32_t bos_id_ = -1;
    int32_t eos_id_ = -1;
    std::vector<int32_t> eog_ids_;
    SpecialTokenSplitter specials_;
    bool add_bos_ = false;
    bool add_eos_ = false;
    bool strip_leading_space_ = false;  // decode() drops the first piece's leading space
};

// Streaming detokenization: feed ids one at a time, get back only complete
// UTF-8 text (never half a character), with the leading-space rule applied as
// decode() applies it to the whole sequence.
class IncrementalDetokenizer {
public:
    explicit IncrementalDetokenizer(const Tokenizer& tok, std::vector<int32_t> context = {});
    std::string push(int32_t id);
    // What push(id) would return now, the state left as it is: how a candidate
    // token reads at this point of the text (a leading space kept where the
    // text has one; "" while it leaves a character incomplete).
    std::string peek(int32_t id) const;
    std::string flush();  // whatever is left at the end (invalid bytes as U+FFFD)

private:
    std::string emit(bool final);

    // Each push decodes only ids_[prefix_offset_:]: the ids since the last
    // text returned plus a few before them, so that the window decodes as it
    // does inside the whole sequence (vLLM's prefix/read offsets).
    const Tokenizer& tok_;
    std::vector<int32_t> ids_;
    size_t prefix_offset_ = 0;
    size_t read_offset_ = 0;    // ids_[:read_offset_] have been turned into text
    std::string prefix_text_;   // decode(ids_[prefix_offset_:read_offset_])
};

}  // namespace minfer
