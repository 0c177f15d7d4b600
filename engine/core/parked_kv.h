// Disaggregation's KV held outside any running sequence.
//
// A prefill instance computes a prompt, samples its first token, and parks
// the prompt's blocks (outgoing); the same step copies their K/V out to host
// memory (StagedKV) and frees them, so the KV sender needs nothing of the
// engine, and the prefill instance's pool is free for the next prompts while
// the bytes travel. A decode instance receives the blocks of a prompt
// (incoming) before the request itself arrives, and parks them until the
// request claims them. Each entry holds its blocks' references, so the pool
// cannot hand them out, and expires after a timeout: a request that never
// comes (the router gave up, the client left) does not leak its blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvcache/block_manager.h"

namespace minfer {

// Seconds on the steady clock (the entries' expiry times).
inline double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct ParkedKV {
    std::vector<int32_t> tokens;  // the prompt
    BlockList blocks;             // covering every token of the prompt
    bool ready = true;            // incoming: false while its K/V are still arriving
    bool outgoing = false;        // a prefill instance's, to be staged at the end of the step
    double expires = 0;           // steady-clock seconds
};

// A prefill instance's prompt with its K/V in host memory, for the KV sender.
struct StagedKV {
    std::vector<int32_t> tokens;
    std::vector<uint64_t> hashes;  // the chain of its committed full blocks
    int32_t num_blocks = 0;        // blocks covering the tokens
    size_t bytes_per_block = 0;    // of K (and of V) in one layer
    // Layer after layer: K of every block, then V of every block.
    std::vector<std::byte> data;
    double expires = 0;
    const std::byte* k(int32_t layer, int32_t block) const {
        return data.data() + (size_t(layer) * 2 * size_t(num_blocks) + size_t(block)) * bytes_per_block;
    }
    const std::byte* v(int32_t layer, int32_t block) const { return k(layer, block) + size_t(num_blocks) * bytes_per_block; }
};

// Staged prompts by transfer id. Thread-safe: the engine puts, the KV sender takes.
class StagedKVStore {
public:
    void put(const std::string& id, StagedKV kv);
    std::optional<StagedKV> take(const std::string& id);
    int32_t expire(double now);
    size_t size() const;
    int64_t bytes() const;
    int64_t num_expired() const;

private:
    mutable std::mutex mutex_;
    std::map<std::string, StagedKV> entries_;
    int64_t expired_ = 0;
};

class ParkedKVTable {
public:
    explicit ParkedKVTable(BlockManager& blocks);

    // Parks `kv` under `id`, replacing (and freeing) an entry of that id.
    void park(const std::string& id, ParkedKV kv);
    ParkedKV* find(const std::string& id);
    // Removes the entry and hands it over (its blocks now the caller's).
    std::optional<ParkedKV> take(const std::string& id);
    // Removes and hands over every outgoing entry.
    std::vector<std::pair<std::string, ParkedKV>> take_outgoing();
    // Frees the entry's blocks (an unknown id is ignored).
    void release(const std::string& id);
    // Frees every entry whose time has passed; returns how many.
    int32_t expire(double now);

    size_t size() const { return entries_.size(); }
    int64_t num_blocks() const;  // blocks held by the entries (shared ones counted once per entry)
    int64_t num_expired() const { return expired_; }

private:
    BlockManager& blocks_;
    std::map<std::string, ParkedKV> entries_;
    int64_t expired_ = 0;
};

}  // namespace minfer
