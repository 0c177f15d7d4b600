#include "engine/grammar/constraint.h"

#include <algorithm>

namespace minfer::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes) : bytes(std::move(token_bytes)), trie(bytes) {}

std::shared_ptr<GrammarMasks> TokenVocabulary::masks_for(const std::shared_ptr<const Grammar>& grammar) const {
    std::lock_guard lock(grammars_mu_);
    // A live GrammarMasks holds its grammar, so its address is not reused meanwhile.
    std::weak_ptr<GrammarMasks>& slot = grammars_[grammar.get()];
    if (std::shared_ptr<GrammarMasks> m = slot.lock()) return m;
    auto m = std::make_shared<GrammarMasks>(grammar, trie, masks);
    slot = m;
    if (grammars_.size() > 64)  // forget the grammars no constraint uses now
        std::erase_if(grammars_, [](const auto& kv) { return kv.second.expired(); });
    return m;
}

Constraint::Constraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
                       std::vector<GrammarTrigger> triggers)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      triggers_(std::move(triggers)),
      recognizer_(*grammar_),
      masks_(vocab_->masks_for(grammar_)) {}

// The recognizer keeps a reference to the grammar, which the copy shares.
Constraint::Constraint(const Constraint& other) = default;

void Constraint::mask(std::vector<uint32_t>& bits, std::span<const int32_t> end_ids) {
    if (!active()) {
        bits.clear();
        return;
    }
    masks_->allowed(recognizer_, bits);
    if (recognizer_.accepting())
        for (const int32_t id : end_ids)
            if (id >= 0 && size_t(id) / 32 < bits.size()) bits[size_t(id) / 32] |= 1u << (id % 32);
}

size_t Constraint::find_trigger(size_t new_bytes) const {
    size_t first = std::string::npos;
    for (const GrammarTrigger& t : triggers_) {
        // Only a match that ends in the new bytes is new.
        const size_t old = text_.size() - new_bytes;
        const size_t from = old >= t.text.size() ? old - t.text.size() + 1 : 0;
        const size_t at = t.at_start ? (text_.starts_with(t.text) ? 0 : std::string::npos) : text_.find(t.text, from);
        first = std::min(first, at);
    }
    return first;
}

bool Constraint::accept(int32_t token) {
    const bool known = token >= 0 && size_t(token) < vocab_->bytes.size();
    const std::string_view b = known ? std::string_view(vocab_->bytes[size_t(token)]) : std::string_view();
    if (!active()) {
        // Free text: any token of the model (control tokens too) until a trigger.
        const std::string_view piece = b;
        text_ += piece;
        const size_t at = find_trigger(piece.size());
        if (at == std::string::npos) {
            steps_.push_back({piece.size(), 0});
            return true;
        }
        const std::string_view from_trigger = std::string_view(text_).substr(at);
        if (!recognizer_.feed(from_trigger)) {
            recognizer_.rollback(recognizer_.size());
            text_.resize(text_.size() - piece.size());
            return false;
        }
        steps_.push_back({piece.size(), from_trigger.size()});
        return true;
    }
    if (!known || b.empty()) return false;
    const size_t before = recognizer_.size();
    if (!recognizer_.feed(b)) {
        recognizer_.rollback(recognizer_.size() - before);
        return false;
    }
    steps_.push_back({0, b.size()});
    return true;
}

void Constraint::rollback(size_t tokens) {
    for (size_t i = 0; i < tokens && !steps_.empty(); ++i) {
        recognizer_.rollback(steps_.back().fed);
        text_.resize(text_.size() - steps_.back().text_bytes);
        steps_.pop_back();
    }
}

bool Constraint::can_only_end() {
    if (!active() || !recognizer_.accepting()) return false;
    for (int b = 0; b < 256; ++b)
        if (recognizer_.feed(uint8_t(b))) {
            recognizer_.rollback(1);
            return false;
        }
    return true;
}

}  // namespace minfer::grammar
