// Disaggregation's KV blocks held outside any running sequence.
//
// A prefill instance computes a prompt, samples its first token, and parks
// the prompt's blocks (outgoing) until the KV sender has copied them out. A
// decode instance receives the blocks of a prompt (incoming) before the
// request itself arrives, and parks them until the request claims them. Each
// entry holds its blocks' references, so the pool cannot hand them out, and
// expires after a timeout: a request that never comes (the router gave up,
// the client left) does not leak its blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
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
    double expires = 0;           // steady-clock seconds
};

class ParkedKVTable {
public:
    explicit ParkedKVTable(BlockManager& blocks) : blocks_(blocks) {}

    // Parks `kv` under `id`, replacing (and freeing) an entry of that id.
    void park(const std::string& id, ParkedKV kv);
    ParkedKV* find(const std::string& id);
    // Removes the entry and hands it over (its blocks now the caller's).
    std::optional<ParkedKV> take(const std::string& id);
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
