#include "engine/grammar/constraint.h"

namespace minfer::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes) : bytes(std::move(token_bytes)), trie(bytes) {}

Constraint::Constraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), recognizer_(*grammar_) {}

// The recognizer keeps a reference to the grammar, which the copy shares.
Constraint::Constraint(const Constraint& other) = default;

void Constraint::mask(std::vector<uint32_t>& bits, std::span<const int32_t> end_ids) {
    vocab_->trie.allowed(recognizer_, bits);
    if (recognizer_.accepting())
        for (const int32_t id : end_ids)
            if (id >= 0 && size_t(id) / 32 < bits.size()) bits[size_t(id) / 32] |= 1u << (id % 32);
}

bool Constraint::accept(int32_t token) {
    if (token < 0 || size_t(token) >= vocab_->bytes.size()) return false;
    const std::string& b = vocab_->bytes[size_t(token)];
    if (b.empty()) return false;
    const size_t before = recognizer_.size();
    if (!recognizer_.feed(b)) {
        recognizer_.rollback(recognizer_.size() - before);
        return false;
    }
    token_bytes_.push_back(b.size());
    return true;
}

void Constraint::rollback(size_t tokens) {
    for (size_t i = 0; i < tokens && !token_bytes_.empty(); ++i) {
        recognizer_.rollback(token_bytes_.back());
        token_bytes_.pop_back();
    }
}

bool Constraint::can_only_end() {
    if (!recognizer_.accepting()) return false;
    for (int b = 0; b < 256; ++b)
        if (recognizer_.feed(uint8_t(b))) {
            recognizer_.rollback(1);
            return false;
        }
    return true;
}

}  // namespace minfer::grammar
