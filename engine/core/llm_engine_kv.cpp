// LLMEngine's side of disaggregation: the blocks a prefill instance parks for
// the KV sender, and those a decode instance receives for a request to come.
// The transfer itself (the wire, the peers) is dist/kv_transfer.h's.
#include <fmt/format.h>

#include <algorithm>

#include "engine/core/llm_engine.h"

namespace minfer {

// A prefill instance's requests that took their first token in this step:
// their prompts' K/V go to host memory for the KV sender, and their blocks
// back to the pool (full ones stay in the prefix cache).
void LLMEngine::stage_outgoing_kv() {
    for (auto& [id, kv] : parked_->take_outgoing()) {
        const KVCacheShape& shape = runner_->kv_shape();
        StagedKV st;
        st.tokens = std::move(kv.tokens);
        st.hashes = kv.blocks.hashes;
        st.num_blocks = int32_t(kv.blocks.blocks.size());
        st.bytes_per_block = shape.bytes_per_block();
        st.data.resize(size_t(shape.n_layers) * 2 * size_t(st.num_blocks) * st.bytes_per_block);
        for (int32_t l = 0; l < shape.n_layers; ++l)
            runner_->read_kv_blocks(kv.blocks.blocks, l, const_cast<std::byte*>(st.k(l, 0)),
                                    const_cast<std::byte*>(st.v(l, 0)));
        st.expires = kv.expires;
        blocks_->free(kv.blocks);
        staged_->put(id, std::move(st));
    }
}

LLMEngine::IncomingKV LLMEngine::begin_incoming_kv(const std::string& id, std::vector<int32_t> tokens,
                                                   std::span<const uint64_t> hashes) {
    const int32_t len = int32_t(tokens.size()), bs = config_.block_size;
    if (tokens.empty()) throw RequestError("a KV transfer of an empty prompt");
    if (len >= config_.max_model_len)
        throw RequestError(fmt::format("a KV transfer of {} tokens: this instance's context is {}", len,
                                       config_.max_model_len));
    for (int32_t t : tokens)
        if (t < 0 || t >= model_.config().vocab_size) throw RequestError("a KV transfer's token is outside the vocabulary");
    // The same chain here as there: the same tokens cut into the same blocks, hashed alike.
    if (int64_t(hashes.size()) > len / bs) throw RequestError("a KV transfer names more full blocks than its tokens fill");
    uint64_t parent = kFirstBlockParent;
    for (size_t i = 0; i < hashes.size(); ++i) {
        parent = hash_block(std::span<const int32_t>(tokens).subspan(i * size_t(bs), size_t(bs)), parent);
        if (parent != hashes[i])
            throw RequestError(fmt::format("block {} of the KV transfer hashes differently here: the instances "
                                           "disagree on the prefix-cache hash",
                                           i));
    }
    expire_parked_kv();
    ParkedKV kv;
    kv.ready = false;
    kv.expires = steady_seconds() + config_.kv_transfer_timeout;
    // Blocks cached here need not travel (never the last token's: it is computed here, for its logits).
    const int32_t have = blocks_->match_prefix(tokens, kv.blocks);
    std::vector<BlockCopy> copies;
    if (!blocks_->allocate(kv.blocks, have, len, copies)) {
        blocks_->cancel_prefix_match(kv.blocks, len);
        throw RequestError(fmt::format("no room in the KV pool for a transfer of {} blocks ({} free)",
                                       (len + bs - 1) / bs - have / bs, blocks_->num_free_blocks()));
    }
    kv.tokens = std::move(tokens);
    IncomingKV in{kv.blocks.blocks, have / bs};
    parked_->park(id, std::move(kv));
    return in;
}

void LLMEngine::finish_incoming_kv(const std::string& id) {
    ParkedKV* kv = parked_->find(id);
    if (!kv) throw RequestError(fmt::format("no KV transfer {} here (it expired?)", id));
    // Every token's K/V is here, but the last one will be computed again by the
    // request's first step (for its logits): the block that holds it is not
    // committed, so that nobody borrows a block that is about to be written.
    blocks_->commit(kv->blocks, kv->tokens, int32_t(kv->tokens.size()) - 1);
    kv->ready = true;
    kv->expires = steady_seconds() + config_.kv_transfer_timeout;
}

void LLMEngine::release_parked_kv(const std::string& id) { parked_->release(id); }

void LLMEngine::expire_parked_kv() {
    const double now = steady_seconds();
    parked_->expire(now);
    staged_->expire(now);
}

// A decode instance's request: the prompt starts from the received blocks, and
// only its last token is computed (the first step samples the first token
// from its logits, as a single instance would). Without usable blocks (gone,
// incomplete, another prompt, or prompt logprobs wanted) the request computes
// its prompt here, as any request does.
void LLMEngine::attach_received_kv(Sequence& seq, const std::string& id) {
    std::optional<ParkedKV> kv = parked_->take(id);
    const bool usable = kv && kv->ready && kv->tokens == seq.tokens && seq.may_reuse_cached_prefix();
    if (!usable) {
        ++kv_received_unused_;
        if (kv) blocks_->free(kv->blocks);
        return;
    }
    seq.blocks = std::move(kv->blocks);
    seq.num_computed = seq.num_tokens() - 1;
}

}  // namespace minfer
