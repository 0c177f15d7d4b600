// Which tokens a grammar allows next: the vocabulary as a trie of token
// bytes, walked with the recognizer.
//
// A token is allowed when the recognizer takes all of its bytes. Tokens that
// share a prefix share the walk: the trie feeds each byte once for all of
// them, and a refused byte prunes every token below it. This is the plain
// walk (a reference, and what the faster masks are checked against); its cost
// grows with the tokens that stay alive, all of them inside a JSON string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/grammar/earley.h"

namespace minfer::grammar {

class TokenTrie {
public:
    // bytes[id]: the token's bytes; an empty string is a token no grammar
    // allows (control tokens, unused ids).
    explicit TokenTrie(const std::vector<std::string>& bytes);

    int32_t vocab_size() const { return vocab_; }
    size_t num_nodes() const { return nodes_.size(); }

    // Sets bit t of mask (word t / 32) for every token the recognizer takes
    // whole, clears the others; the recognizer is left as it was. The caller
    // adds the end-of-sequence tokens when r.accepting().
    void allowed(Recognizer& r, std::vector<uint32_t>& mask) const;

private:
    struct Node {
        uint32_t first_child = 0, num_children = 0;  // children are consecutive, sorted by byte
        uint32_t first_token = 0, num_tokens = 0;    // into tokens_: the ids that end here
        uint8_t byte = 0;
    };
    void walk(uint32_t node, Recognizer& r, std::vector<uint32_t>& mask) const;

    int32_t vocab_ = 0;
    std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
    std::vector<int32_t> tokens_;
};

}  // namespace minfer::grammar
