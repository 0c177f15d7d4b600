#include "engine/text/tokenizer.h"

#include <fmt/format.h>

#include "engine/text/bpe_tokenizer.h"
#include "engine/gguf/gguf.h"
#include "engine/text/sentencepiece_tokenizer.h"
#include "engine/text/unicode_text.h"
#include "engine/text/wordpiece_tokenizer.h"

namespace minfer {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& file) {
    // A wrongly typed key is a bad vocabulary too: callers catch one error type.
    try {
        if (!file.has("tokenizer.ggml.model"))
            throw TokenizerError("the file has no tokenizer (tokenizer.ggml.model is missing)");
        const std::string& model = file.get_string("tokenizer.ggml.model");
        if (model == "llama") return std::make_unique<SentencePieceTokenizer>(GgufVocab::from_gguf(file));
        if (model == "gpt2") return std::make_unique<BpeTokenizer>(GgufVocab::from_gguf(file));
        if (model == "bert") return std::make_unique<WordPieceTokenizer>(GgufVocab::from_gguf(file));
        throw TokenizerError("tokenizer model '" + model + "' is not supported yet");
    } catch (const GGUFError& e) {
        throw TokenizerError(e.what());
    }
}

void Tokenizer::init_common(const GgufVocab& vocab) {
    pieces_ = vocab.tokens;
    VocabSpecials specials = analyse_specials(vocab);
    types_ = std::move(specials.types);
    eog_ids_ = std::move(specials.end_of_generation);
    specials_ = std::move(specials.splitter);
    bos_id_ = vocab.bos_id;
    eos_id_ = vocab.eos_id;
}

void Tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= vocab_size())
        throw TokenizerError(fmt::format("token id {} is out of range: the vocabulary has {} tokens", id, vocab_size()));
}

std::string Tokenizer::token_bytes(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string bytes;
    bool first_text = true;
    for (int32_t id : ids) {
        check_id(id);
        const TokenType type = types_[static_cast<size_t>(id)];
        if (type == TokenType::Control || type == TokenType::Unused) continue;
        std::string piece = token_bytes(id);
        // The space the encoder put in front of the text.
        if (first_text && strip_leading_space_ && (type == TokenType::Normal || type == TokenType::UserDefined) &&
            piece.starts_with(' '))
            piece.erase(0, 1);
        bytes += piece;
        first_text = false;
    }
    return unicode::repair_utf8(bytes);
}

std::string Tokenizer::token_to_piece(int32_t id) const {
    check_id(id);
    const TokenType type = types_[static_cast<size_t>(id)];
    if (type == TokenType::Control || type == TokenType::Unused) return pieces_[static_cast<size_t>(id)];
    return token_bytes(id);
}

}  // namespace minfer
