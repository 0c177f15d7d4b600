#include "engine/grammar/grammar_cache.h"

namespace minfer::grammar {

std::shared_ptr<const Grammar> GrammarCache::get(const std::string& key, const std::function<Grammar()>& compile) {
    {
        std::lock_guard lock(mu_);
        if (auto it = by_key_.find(key); it != by_key_.end()) {
            recent_.splice(recent_.begin(), recent_, it->second.at);
            ++hits_;
            return it->second.grammar;
        }
    }
    // Compiled outside the lock: two requests may compile one source at once,
    // and the first to finish is kept.
    auto grammar = std::make_shared<const Grammar>(compile());
    std::lock_guard lock(mu_);
    if (auto it = by_key_.find(key); it != by_key_.end()) return it->second.grammar;
    recent_.push_front(key);
    by_key_.emplace(key, Entry{grammar, recent_.begin()});
    while (by_key_.size() > capacity_) {
        by_key_.erase(recent_.back());
        recent_.pop_back();
    }
    return grammar;
}

size_t GrammarCache::size() const {
    std::lock_guard lock(mu_);
    return by_key_.size();
}

size_t GrammarCache::hits() const {
    std::lock_guard lock(mu_);
    return hits_;
}

}  // namespace minfer::grammar
