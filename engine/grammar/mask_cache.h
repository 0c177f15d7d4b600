// Token masks by lookup: XGrammar's adaptive token-mask cache, on Earley items.
//
// What may follow the text is what may follow one of the recognizer's
// positions (an incomplete item's rule, alternative and dot). For one
// position the vocabulary splits, once, into the tokens the rest of its
// alternative takes whole (allowed wherever the position comes up), the tokens
// it refuses before it could have ended (never allowed through it), and the
// uncertain ones: refused after the rest could have ended, so the enclosing
// rules decide, and each step checks them against the recognizer. A rest that
// may end before any byte leaves those tokens to its enclosing items, which
// are in the same set.
//
// A split depends only on the rest and the rules it reaches, so it is keyed
// by their canonical text and shared by every grammar over the vocabulary:
// inside a JSON string the whole vocabulary is alive and the plain trie walk
// is at its slowest, and that split is computed once per tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/earley.h"
#include "engine/grammar/token_mask.h"

namespace minfer::grammar {

// Per rule, the one place it is used, (-1, -1, -1) if it is used in none or
// several, or is the root.
std::vector<Recognizer::Position> single_uses(const Grammar& g);
// A position's rest, and after it, while the rule it is in is used in one
// place only, what follows that place: a position at the end of a helper
// rule (the last character of a bounded repetition) then knows what comes
// after (the closing quote), and the tokens that run past its own rule are
// sure or refused by the split instead of uncertain, each checked by the
// recognizer at every step.
Sequence rest_in_context(const Grammar& g, const Recognizer::Position& p, const std::vector<Recognizer::Position>& uses);

// Appends the nonzero words of a bitset as (word index, word), indices ascending.
void append_nonzero_words(const std::vector<uint32_t>& words, std::vector<std::pair<uint32_t, uint32_t>>& out);

// A bitset kept as its words, or, when few are not zero, as those words
// alone: most splits allow a handful of tokens, and a mask step reads every
// split of its positions, so on a 262k-token vocabulary the dense words of
// cold splits would cost more memory traffic than the rest of the step.
class WordSet {
public:
    WordSet() = default;
    explicit WordSet(const std::vector<uint32_t>& words);
    // The same, reading only the blocks of words set in `blocks` (TokenTrie::Touched).
    WordSet(const std::vector<uint32_t>& words, const std::vector<uint64_t>& blocks);
    bool any() const { return !dense_.empty() || !sparse_.empty(); }
    // The words it keeps (all of them when dense).
    size_t size_in_words() const { return dense_.empty() ? sparse_.size() : dense_.size(); }
    // out |= this (out has the set's size).
    void or_into(std::vector<uint32_t>& out) const;
    // Appends the nonzero words as (word index, word), indices ascending.
    void append_words(std::vector<std::pair<uint32_t, uint32_t>>& out) const;

private:
    std::vector<uint32_t> dense_;                       // every word, or empty
    std::vector<std::pair<uint32_t, uint32_t>> sparse_;  // (word index, word) of the words not zero
};

struct RestMask {
    WordSet sure;       // bit t: the rest takes token t whole
    WordSet uncertain;  // bit k: the enclosing rules decide the token of rank k (TokenTrie)
};

// A grammar with one rule more, its root: the rest being split. The splits
// of one grammar's positions reuse it (and its nullable rules) rather than
// copying the grammar for each.
class RestGrammar {
public:
    explicit RestGrammar(const Grammar& g);
    // The grammar whose root is `rest` (valid until the next call).
    const Grammar& with(const Sequence& rest);
    // The grammar's rules (the rest's rule is the last; no other uses it).
    const Grammar& base() const { return grammar_; }
    const std::vector<bool>& nullable() const { return nullable_; }

private:
    Grammar grammar_;
    std::vector<bool> nullable_;
};

// The splits of one vocabulary, shared by its grammars (thread-safe).
class MaskCache {
public:
    // The split of a rest of g's grammar (rest_in_context), computed on first use.
    std::shared_ptr<const RestMask> get(RestGrammar& g, const Sequence& rest, const TokenTrie& trie);
    size_t size() const;
    // Computes the split of every position of g now (a tokenizer's common
    // grammar, such as any JSON value, before the first request needs it).
    void warm(const Grammar& g, const TokenTrie& trie);

private:
    mutable std::mutex mu_;
    std::unordered_map<std::string, std::shared_ptr<const RestMask>> by_rest_;
};

// One grammar's positions → their splits (skips the canonical key after the
// first lookup); shared by the copies of a constraint.
class GrammarMasks {
public:
    GrammarMasks(std::shared_ptr<const Grammar> grammar, const TokenTrie& trie, MaskCache& cache)
        : grammar_(std::move(grammar)), trie_(trie), cache_(cache) {}

    // Bit t of mask for every token r takes whole (what TokenTrie::allowed
    // gives), from the splits of r's positions. r is left as it was.
    void allowed(Recognizer& r, std::vector<uint32_t>& mask);

private:
    std::shared_ptr<const RestMask> split(const Recognizer::Position& p);

    std::shared_ptr<const Grammar> grammar_;
    const TokenTrie& trie_;
    MaskCache& cache_;
    std::mutex mu_;
    std::unordered_map<uint64_t, std::shared_ptr<const RestMask>> by_position_;
    std::vector<Recognizer::Position> uses_;  // single_uses(*grammar_), on first use
    std::unique_ptr<RestGrammar> rest_grammar_;  // on first use
};

}  // namespace minfer::grammar
