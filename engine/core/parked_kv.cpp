#include "engine/core/parked_kv.h"

namespace minfer {

ParkedKVTable::ParkedKVTable(BlockManager& blocks) : blocks_(blocks) {}

void ParkedKVTable::park(const std::string& id, ParkedKV kv) {
    release(id);
    entries_.emplace(id, std::move(kv));
}

ParkedKV* ParkedKVTable::find(const std::string& id) {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
}

std::optional<ParkedKV> ParkedKVTable::take(const std::string& id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    ParkedKV kv = std::move(it->second);
    entries_.erase(it);
    return kv;
}

void ParkedKVTable::release(const std::string& id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    blocks_.free(it->second.blocks);
    entries_.erase(it);
}

int32_t ParkedKVTable::expire(double now) {
    int32_t n = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->second.expires > now) {
            ++it;
            continue;
        }
        blocks_.free(it->second.blocks);
        it = entries_.erase(it);
        ++n;
    }
    expired_ += n;
    return n;
}

std::vector<std::pair<std::string, ParkedKV>> ParkedKVTable::take_outgoing() {
    std::vector<std::pair<std::string, ParkedKV>> out;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (!it->second.outgoing) {
            ++it;
            continue;
        }
        out.emplace_back(it->first, std::move(it->second));
        it = entries_.erase(it);
    }
    return out;
}

void StagedKVStore::put(const std::string& id, StagedKV kv) {
    std::lock_guard lock(mutex_);
    entries_.insert_or_assign(id, std::move(kv));
}

std::optional<StagedKV> StagedKVStore::take(const std::string& id) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    StagedKV kv = std::move(it->second);
    entries_.erase(it);
    return kv;
}

int32_t StagedKVStore::expire(double now) {
    std::lock_guard lock(mutex_);
    int32_t n = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->second.expires > now) {
            ++it;
            continue;
        }
        it = entries_.erase(it);
        ++n;
    }
    expired_ += n;
    return n;
}

size_t StagedKVStore::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

int64_t StagedKVStore::bytes() const {
    std::lock_guard lock(mutex_);
    int64_t n = 0;
    for (const auto& [id, kv] : entries_) n += int64_t(kv.data.size());
    return n;
}

int64_t StagedKVStore::num_expired() const {
    std::lock_guard lock(mutex_);
    return expired_;
}

int64_t ParkedKVTable::num_blocks() const {
    int64_t n = 0;
    for (const auto& [id, kv] : entries_) n += int64_t(kv.blocks.blocks.size());
    return n;
}

}  // namespace minfer
