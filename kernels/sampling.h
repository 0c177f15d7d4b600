// Sampling parameters and the reference sampler.
//
// Every random draw comes from a counter-based generator (Philox4x32-10) keyed
// by the request's seed and indexed by (stream, position), so a request
// samples the same token whatever batch it runs in and on either backend.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace minfer {

struct SamplingParams {
    float temperature = 1.0f;        // 0 = greedy
    int32_t top_k = 0;               // 0 or negative = off
    float top_p = 1.0f;              // 1 = off
    float min_p = 0.0f;              // 0 = off
    float repetition_penalty = 1.0f; // > 1 discourages tokens of the prompt and the output
    float presence_penalty = 0.0f;   // subtracted once from every token already generated
    float frequency_penalty = 0.0f;  // subtracted per occurrence in the output
    std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits first
    uint64_t seed = 0;

    // Throws std::invalid_argument naming the parameter that is out of range.
    void validate(int32_t vocab_size) const;
    bool greedy() const { return temperature <= 0.0f; }
};

// One row of logits to sample, with what its processors need.
struct SamplingRow {
    const SamplingParams* params = nullptr;
    uint64_t stream = 0;                   // which sample of the request (n > 1)
    int64_t position = 0;                  // position of the token being sampled
    std::span<const int32_t> prompt_tokens;
    std::span<const int32_t> output_tokens;
    std::span<const int32_t> suppressed_ids;  // may not be sampled (min_tokens holds back EOS and stop ids)
    // If not empty, a bitmask over the vocabulary (bit t of word t / 32): only
    // tokens whose bit is set may be sampled (a grammar's allowed tokens).
    std::span<const uint32_t> allowed_mask;
    // Speculative verification: >= 0, the token a proposer drafted for this
    // position. The row then returns the draft if it is accepted, and otherwise
    // a token drawn from what the draft leaves (never the draft); greedy rows
    // return the argmax as always, which is the draft exactly when it is accepted.
    int32_t draft_token = -1;
    // The proposer's distribution q the draft was drawn from (a draft model's,
    // over the vocabulary, after the same processing); empty: the proposer
    // always proposes it (n-gram lookup: q is one-hot at the draft).
    std::span<const float> draft_probs;
};

// What a random number is drawn for: each purpose has its own Philox stream,
// so a verification's draws never reuse a plain sample's.
enum class Draw : uint32_t {
    Sample = 0,   // the token of a row
    Accept = 1,   // whether a draft is accepted
    Recover = 2,  // the token that replaces a rejected draft
    Draft = 3,    // a draft model's own token
};
// The Philox stream of `purpose` for sample `stream` (the purpose in the top byte).
inline uint64_t draw_stream(uint64_t stream, Draw purpose) { return stream ^ (uint64_t(purpose) << 56); }

// Philox4x32-10: 128 random bits from a 64-bit key and a 128-bit counter.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// A uniform float in [0, 1) for (seed, stream, position).
float philox_uniform(uint64_t seed, uint64_t stream, int64_t position);

// Applies the row's processors to `logits` in place and returns the token.
// With a draft (row.draft_token >= 0) and temperature > 0, it verifies the
// draft by Leviathan et al.'s rule, with p the fully processed distribution
// (temperature, top-k, top-p, min-p): the draft d is accepted with
// probability min(1, p(d) / q(d)), else the token is drawn from
// norm(max(0, p - q)). Either way the token is distributed exactly as p.
int32_t sample_row(std::span<float> logits, const SamplingRow& row);

// The distribution sample_row draws from for this row, over the vocabulary:
// probs[t], 0 outside the candidates top-k, top-p and min-p keep (one-hot at
// the argmax for a greedy row). Applies the processors to `logits` in place.
// A draft model's q: what it proposes from, and what verification divides by.
void sampling_distribution(std::span<float> logits, const SamplingRow& row, std::span<float> probs);
// A token drawn from `probs` (inverse CDF in id order) with the row's random
// stream for `purpose`.
int32_t draw_from(std::span<const float> probs, const SamplingRow& row, Draw purpose);

}  // namespace minfer
