// A sequence's grammar constraint over a tokenizer's vocabulary: which tokens
// may come next, and the state advanced by the tokens that came.
//
// The vocabulary (token bytes and their trie) is built once per tokenizer and
// shared; each sequence holds its own recognizer, copied when it forks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/grammar/earley.h"
#include "engine/grammar/token_mask.h"

namespace minfer::grammar {

struct TokenVocabulary {
    std::vector<std::string> bytes;  // each token's bytes; empty: never allowed (control tokens)
    TokenTrie trie;
    explicit TokenVocabulary(std::vector<std::string> token_bytes);
};

class Constraint {
public:
    Constraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab);
    Constraint(const Constraint& other);

    // The allowed tokens as bits (bit t of word t / 32); the end ids too when
    // the text so far is a whole sentence.
    void mask(std::vector<uint32_t>& bits, std::span<const int32_t> end_ids);
    // Advances by a token's bytes; false (nothing changed) if the grammar refuses them.
    bool accept(int32_t token);
    // Undoes the last `tokens` accepted tokens.
    void rollback(size_t tokens);
    bool accepting() const { return recognizer_.accepting(); }
    // A whole sentence that no byte can extend: the sequence should end.
    bool can_only_end();

private:
    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const TokenVocabulary> vocab_;
    Recognizer recognizer_;
    std::vector<size_t> token_bytes_;  // bytes each accepted token fed
};

}  // namespace minfer::grammar
