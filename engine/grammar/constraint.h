// A sequence's grammar constraint over a tokenizer's vocabulary: which tokens
// may come next, and the state advanced by the tokens that came.
//
// The vocabulary (token bytes and their trie) is built once per tokenizer and
// shared; each sequence holds its own recognizer, copied when it forks.
//
// A lazy constraint (tool_choice "auto": the model may answer in prose or call
// a tool) has triggers: until the text contains one, every token is free;
// from the trigger on, the grammar holds, and the grammar's sentences begin
// with the trigger text (fed to it from there).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/earley.h"
#include "engine/grammar/mask_cache.h"
#include "engine/grammar/token_mask.h"

namespace minfer::grammar {

struct TokenVocabulary {
    std::vector<std::string> bytes;  // each token's bytes; empty: never allowed (control tokens)
    TokenTrie trie;
    mutable MaskCache masks;         // the positions' splits, shared by every grammar (mask_cache.h)
    explicit TokenVocabulary(std::vector<std::string> token_bytes);

    // One grammar's positions and their splits, shared by every constraint
    // of that grammar while one lives: requests with a cached grammar find
    // its positions' splits without building their keys again.
    std::shared_ptr<GrammarMasks> masks_for(const std::shared_ptr<const Grammar>& grammar) const;

private:
    mutable std::mutex grammars_mu_;
    mutable std::unordered_map<const Grammar*, std::weak_ptr<GrammarMasks>> grammars_;
};

// Where a lazy grammar starts: the first place the text holds `text`, or,
// with at_start, only a text that begins with it.
struct GrammarTrigger {
    std::string text;
    bool at_start = false;
};

class Constraint {
public:
    Constraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
               std::vector<GrammarTrigger> triggers = {});
    Constraint(const Constraint& other);

    // The allowed tokens as bits (bit t of word t / 32); the end ids too when
    // the text so far is a whole sentence. Empty: every token is allowed (a
    // lazy grammar not yet triggered).
    void mask(std::vector<uint32_t>& bits, std::span<const int32_t> end_ids);
    // Advances by a token's bytes; false (nothing changed) if the grammar refuses them.
    bool accept(int32_t token);
    // Undoes the last `tokens` accepted tokens.
    void rollback(size_t tokens);
    bool accepting() const { return !active() || recognizer_.accepting(); }
    // A whole sentence that no byte can extend: the sequence should end.
    bool can_only_end();
    // The grammar holds (it has no triggers, or one has come).
    bool active() const { return triggers_.empty() || recognizer_.size() > 0; }

private:
    // Where a trigger begins in text_, or npos; text_ has just grown by new_bytes.
    size_t find_trigger(size_t new_bytes) const;

    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const TokenVocabulary> vocab_;
    std::vector<GrammarTrigger> triggers_;
    Recognizer recognizer_;
    struct Step {
        size_t text_bytes;  // bytes the token added to text_ (before the trigger)
        size_t fed;         // bytes it fed the recognizer
    };
    std::vector<Step> steps_;  // one per accepted token
    std::shared_ptr<GrammarMasks> masks_;  // shared by the constraints of the grammar (masks_for)
    std::string text_;         // a lazy grammar's text until it triggers
};

}  // namespace minfer::grammar
