// Compiled grammars by their source: clients send the same schema with every
// request (a tool's parameters, an app's response_format), and the grammar it
// compiles to is immutable, so the requests share one copy. The masks' splits
// are shared by every grammar already (mask_cache.h); this saves the compile
// and keeps one grammar's per-position table warm across requests.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

class GrammarCache {
public:
    explicit GrammarCache(size_t capacity = 256) : capacity_(capacity) {}

    // The grammar compiled from `key` (the source, with whatever else changes
    // the result, e.g. a kind prefix and options), compiled on a miss by
    // `compile`, whose exceptions pass through and cache nothing. The least
    // recently used entry goes when more than `capacity` are held. Thread-safe.
    std::shared_ptr<const Grammar> get(const std::string& key, const std::function<Grammar()>& compile);

    size_t size() const;
    size_t hits() const;

private:
    mutable std::mutex mu_;
    size_t capacity_;
    size_t hits_ = 0;
    std::list<std::string> recent_;  // most recent first
    struct Entry {
        std::shared_ptr<const Grammar> grammar;
        std::list<std::string>::iterator at;
    };
    std::unordered_map<std::string, Entry> by_key_;
};

}  // namespace minfer::grammar
