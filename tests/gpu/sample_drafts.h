// Rows for minfer_gpu_ops' sample_drafts case: speculative verification
// (SamplingRow::draft_token, draft_probs) on the device against the reference.
// Row r's kind is r % 16: one-hot drafts (n-gram lookup) of likely, unlikely
// and cut tokens, drafts with a draft model's q (close to p, unrelated to p,
// sparse, zero at the draft), greedy and masked rows with drafts, a plain row
// among them, and everything at once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/sampling.h"

namespace minfer::gpu_test {

// What a draft row owns (the SamplingRow points into it).
struct DraftRowData {
    SamplingParams params;
    std::vector<int32_t> prompt, output;
    std::vector<uint32_t> mask;
    int32_t draft = -1;
    std::vector<float> q;  // empty: one-hot at the draft
};

// q normalised in float from positive weights, and a draft drawn from it.
inline void draft_from_weights(std::mt19937& rng, const std::vector<double>& w, DraftRowData& d) {
    double sum = 0;
    for (double x : w) sum += x;
    d.q.resize(w.size());
    for (size_t t = 0; t < w.size(); ++t) d.q[t] = float(w[t] / sum);
    std::discrete_distribution<int32_t> pick(w.begin(), w.end());
    d.draft = pick(rng);
}

inline void make_draft_row(std::mt19937& rng, int32_t r, int32_t vocab, const float* logits, DraftRowData& d) {
    std::uniform_int_distribution<int32_t> id(0, vocab - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::normal_distribution<double> noise(0.0, 1.0);
    SamplingParams& p = d.params;
    p.seed = uint64_t(rng()) << 32 | rng();
    const int32_t top = int32_t(std::max_element(logits, logits + vocab) - logits);
    const int32_t bottom = int32_t(std::min_element(logits, logits + vocab) - logits);
    // A draft model close to the target: softmax of the logits plus noise.
    auto near_q = [&](double temperature) {
        auto w = std::vector<double>(size_t(vocab));
        for (int32_t t = 0; t < vocab; ++t) w[t] = std::exp((logits[t] - logits[top]) / temperature + 0.5 * noise(rng));
        draft_from_weights(rng, w, d);
    };
    auto allow_few = [&](int32_t also) {  // a grammar's few tokens, and `also` (-1: none)
        d.mask.assign(size_t(vocab + 31) / 32, 0u);
        for (int i = 0; i < 6; ++i) {
            const int32_t t = i == 0 && also >= 0 ? also : id(rng);
            d.mask[size_t(t) / 32] |= 1u << (t % 32);
        }
    };
    auto allowed = [&](int32_t t) { return d.mask[size_t(t) / 32] >> (t % 32) & 1u; };
    switch (r % 16) {
        case 0: p.temperature = 0.0f, d.draft = id(rng); break;      // greedy: the argmax, draft or not
        case 1: p.temperature = 0.0f, near_q(1.0); break;            // greedy with a q
        case 2: p.temperature = 0.5f, d.draft = top; break;          // one-hot, likely: often accepted
        case 3: p.temperature = 0.7f, p.top_k = 40, p.top_p = 0.9f, d.draft = top; break;
        case 4: p.temperature = 1.0f, d.draft = id(rng); break;      // one-hot, unlikely: mostly replaced
        case 5: p.temperature = 1.0f, p.top_p = 0.9f, d.draft = bottom; break;  // cut by top-p: p(d) = 0
        case 6: p.temperature = 1.2f, p.top_k = 20, p.min_p = 0.1f, d.draft = id(rng); break;
        case 7: p.temperature = 1.0f, near_q(1.0); break;            // a draft model's q and its draft
        case 8: p.temperature = 0.8f, p.top_k = 50, p.top_p = 0.95f, near_q(0.8); break;
        case 9: {                                                    // q unrelated to p
            p.temperature = 0.9f;
            auto w = std::vector<double>(size_t(vocab));
            for (double& x : w) x = 0.01 + unit(rng);
            draft_from_weights(rng, w, d);
            break;
        }
        case 10: {  // sparse q: a few tokens, the likeliest among them
            p.temperature = 1.0f, p.min_p = 0.05f;
            std::vector<double> w(size_t(vocab), 0.0);
            w[size_t(top)] = 1.0;
            for (int i = 0; i < 7; ++i) w[size_t(id(rng))] += 0.05 + unit(rng);
            draft_from_weights(rng, w, d);
            break;
        }
        case 11:  // q(d) = 0: accepted exactly when p(d) > 0
            p.temperature = 1.0f, near_q(1.0);
            d.draft = top;
            d.q[size_t(top)] = 0.0f;
            break;
        case 12:  // masked, a one-hot draft among the allowed tokens
            p.temperature = 1.0f;
            d.draft = id(rng);
            allow_few(d.draft);
            break;
        case 13:  // masked, a q drafting a disallowed token (p(d) = 0)
            p.temperature = 1.0f, p.top_p = 0.9f;
            allow_few(-1);
            near_q(1.0);
            if (allowed(d.draft)) d.draft = allowed(bottom) ? (bottom + 1) % vocab : bottom;
            if (allowed(d.draft)) d.draft = -1;  // vocab too small to find one: a plain row
            break;
        case 14:  // no draft: a plain row between draft rows (the q rows' indices skip it)
            p.temperature = 1.0f, p.top_k = 100, p.repetition_penalty = 1.3f;
            break;
        default:  // everything at once; every other one greedy and masked
            p.temperature = r % 32 == 31 ? 0.0f : 0.9f;
            p.top_k = 50, p.top_p = 0.9f, p.min_p = 0.05f;
            p.repetition_penalty = 1.3f, p.presence_penalty = 0.5f, p.frequency_penalty = 0.4f;
            p.logit_bias = {{id(rng), 5.0f}, {top, -1.5f}};
            near_q(0.9);
            if (r % 32 == 31) allow_few(d.draft);
    }
    for (int i = 0; i < 20; ++i) d.prompt.push_back(id(rng));
    for (int i = 0; i < 8; ++i) d.output.push_back(i % 2 ? d.prompt[size_t(i)] : id(rng));
    p.validate(vocab);
}

// The SamplingRow of row r (its stream's high bits and top byte vary, so that
// the purpose's XOR into the top byte is exercised).
inline SamplingRow draft_sampling_row(int32_t r, const DraftRowData& d) {
    SamplingRow row;
    row.params = &d.params;
    row.stream = uint64_t(r % 3) | (r % 5 == 3 ? uint64_t(1) << 36 : 0) | (r % 7 == 5 ? uint64_t(0xA5) << 56 : 0);
    row.position = 2000 + 3 * r + (r % 4 == 1 ? int64_t(1) << 33 : 0);
    row.prompt_tokens = d.prompt;
    row.output_tokens = d.output;
    row.allowed_mask = d.mask;
    row.draft_token = d.draft;
    row.draft_probs = d.q;
    return row;
}

}  // namespace minfer::gpu_test
