#include "engine/tokenizer.h"

#include "engine/gguf.h"
#include "engine/sentencepiece_tokenizer.h"

namespace minfer {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& file) {
    // A wrongly typed key is a bad vocabulary too: callers catch one error type.
    try {
        if (!file.has("tokenizer.ggml.model"))
            throw TokenizerError("the file has no tokenizer (tokenizer.ggml.model is missing)");
        const std::string& model = file.get_string("tokenizer.ggml.model");
        if (model == "llama") return std::make_unique<SentencePieceTokenizer>(SpmVocab::from_gguf(file));
        throw TokenizerError("tokenizer model '" + model + "' is not supported yet");
    } catch (const GGUFError& e) {
        throw TokenizerError(e.what());
    }
}

}  // namespace minfer
