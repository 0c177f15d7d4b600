// What the recognizer of a rest still allows, as a lazily built DFA over
// code points: the fast path of the whole-vocabulary walk (TokenTrie::classify).
//
// After a text u, an Earley recognizer accepts exactly what one of its
// residuals allows: the symbol sequences α that remain after the last
// character of a leftmost derivation root ⇒* u α. Its next character c is
// taken when some α expands leftmost to a class holding c, and the residuals
// after c are the remainders behind those classes. The set of residuals is
// therefore the whole state: two texts with the same set are taken alike by
// every continuation (whether they end the sentence too). Inside a JSON
// string the set after any plain character is the set before it, so one
// state serves the whole string, and a trie walk over the vocabulary costs a
// table lookup per node instead of an Earley step.
//
// A state is computed on first use: its residuals are expanded to their
// leading classes once, and its transitions on ASCII characters cached. A
// state whose expansion would be unbounded (left recursion, long or many
// residuals) is unknown: the walk hands such a text to the recognizer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

class Residuals {
public:
    static constexpr int32_t kRefused = -2;  // no residual takes the character
    static constexpr int32_t kUnknown = -1;  // past the bounds: ask the recognizer

    // The states of the sentences of `start` (a sequence of g's symbols); the
    // grammar must outlive this. State 0 is the start.
    Residuals(const Grammar& g, Sequence start);
    // The same with nullable_rules(g) computed already.
    Residuals(const Grammar& g, Sequence start, std::vector<bool> nullable);

    // Whether the state is expanded within the bounds (else every transition is kUnknown).
    bool known(int32_t state);
    // The text so far is a whole sentence (some residual derives the empty string).
    bool accepting(int32_t state) { return known(state) && states_[size_t(state)].accepting; }
    // The state after the character cp: a state, kRefused or kUnknown.
    int32_t next(int32_t state, uint32_t cp);
    // Some character in [lo, hi] may come next (an unfinished UTF-8 character).
    bool expects(int32_t state, uint32_t lo, uint32_t hi);
    // The code points after which the state is itself again (the set of
    // residuals unchanged): a JSON string's plain characters, a number's
    // digits. Empty if none, or the state is unknown.
    const CharClass& loop(int32_t state);
    // The class C of characters every text of which the state takes: its
    // loop's, or, for a state a few characters before one that loops over C
    // (a string short of its minimum length: each character counts one down,
    // then any number may follow), C when every character of C takes each
    // state on the way to one same next state. Empty if none.
    const CharClass& drain(int32_t state);
    // The state after any character of c, when each takes the state to the
    // same one (kRefused: none is taken); kUnknown if they part.
    int32_t next_on(int32_t state, const CharClass& c);
    size_t size() const { return states_.size(); }

private:
    struct State {
        std::vector<Sequence> residuals;  // sorted, distinct
        bool expanded = false, known = false, accepting = false;
        std::vector<std::pair<int32_t, Sequence>> firsts;  // (class, remainder behind it)
        std::array<int32_t, 128> ascii;                    // next() per ASCII character, kNotYet until asked
        // The other code points in runs that every class takes whole or not
        // at all, so one next() serves a run: run i is [cuts[i], cuts[i + 1]).
        std::vector<uint32_t> cuts;
        std::vector<int32_t> run_next;  // kNotYet until asked
        std::vector<bool> run_taken;    // some class takes the run
        bool looped = false;            // loop_ computed
        CharClass loop_;
        bool drained = false;           // drain_ computed
        CharClass drain_;
    };
    static constexpr int32_t kNotYet = -3;

    void expand(int32_t state);
    // Appends the leading classes of s[from..] with their remainders; false past the bounds.
    bool expand(const Sequence& s, size_t from, int depth, std::vector<std::pair<int32_t, Sequence>>& out, int& budget) const;
    int32_t intern(std::vector<Sequence> residuals);
    int32_t step(int32_t state, uint32_t cp);
    static size_t run_of(const State& st, uint32_t cp);

    const Grammar& g_;
    std::vector<bool> nullable_;
    std::vector<State> states_;
    std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace minfer::grammar
