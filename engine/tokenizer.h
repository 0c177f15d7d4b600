// Tokenizers built from a GGUF file's `tokenizer.ggml.*` metadata.
//
// A1 ships the SentencePiece one (tokenizer.ggml.model = "llama"), run by the
// sentencepiece library; byte-level BPE and chat templates come with A3.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

    // Text to ids. With add_special, BOS (and EOS) are added as the file's
    // add_bos_token / add_eos_token flags say; without, no special token at all.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
    // Ids to text: byte tokens joined into UTF-8, control tokens dropped, the
    // dummy-prefix space of the first piece removed.
    virtual std::string decode(std::span<const int32_t> ids) const = 0;

    int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
    const std::string& piece(int32_t id) const { return pieces_.at(static_cast<size_t>(id)); }
    int32_t bos_id() const { return bos_id_; }  // -1 if none
    int32_t eos_id() const { return eos_id_; }  // -1 if none
    // Ids that end a generation: EOS, EOT/EOM when the file names them.
    const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }

protected:
    std::vector<std::string> pieces_;
    int32_t bos_id_ = -1;
    int32_t eos_id_ = -1;
    std::vector<int32_t> eog_ids_;
};

// Streaming detokenization: feed ids one at a time, get back only complete
// UTF-8 text (never half a character), with the leading-space rule applied as
// decode() applies it to the whole sequence.
class IncrementalDetokenizer {
public:
    explicit IncrementalDetokenizer(const Tokenizer& tok, std::vector<int32_t> context = {});
    std::string push(int32_t id);
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
