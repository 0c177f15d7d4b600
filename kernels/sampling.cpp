#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace minfer {

void SamplingParams::validate(int32_t vocab_size) const {
    auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
    if (!(temperature >= 0.0f) || !std::isfinite(temperature)) bad("temperature must be >= 0");
    if (!(top_p > 0.0f && top_p <= 1.0f)) bad("top_p must be in (0, 1]");
    if (!(min_p >= 0.0f && min_p <= 1.0f)) bad("min_p must be in [0, 1]");
    if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) bad("repetition_penalty must be > 0");
    if (!(std::fabs(presence_penalty) <= 2.0f)) bad("presence_penalty must be in [-2, 2]");
    if (!(std::fabs(frequency_penalty) <= 2.0f)) bad("frequency_penalty must be in [-2, 2]");
    for (const auto& [id, bias] : logit_bias) {
        if (id < 0 || id >= vocab_size) bad("logit_bias token id " + std::to_string(id) + " is outside the vocabulary");
        if (!(std::fabs(bias) <= 100.0f)) bad("logit_bias values must be in [-100, 100]");
    }
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
    constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
    constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
    for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = uint64_t{kMul0} * c[0];
        const uint64_t p1 = uint64_t{kMul1} * c[2];
        c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
             static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
        k[0] += kWeyl0;
        k[1] += kWeyl1;
    }
    return c;
}

float philox_uniform(uint64_t seed, uint64_t stream, int64_t position) {
    const auto pos = static_cast<uint64_t>(position);
    const auto r = philox4x32({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos >> 32),
                               static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                              {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
    return static_cast<float>(r[0] >> 8) * 0x1.0p-24f;  // 24 random bits: exact in a float
}

namespace {

void apply_penalties(std::span<float> logits, const SamplingRow& row) {
    const SamplingParams& p = *row.params;
    for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
    for (int32_t id : row.suppressed_ids)
        if (id >= 0 && id < static_cast<int32_t>(logits.size())) logits[id] = -INFINITY;
    if (!row.allowed_mask.empty())
        for (size_t t = 0; t < logits.size(); ++t)
            if (t / 32 >= row.allowed_mask.size() || !(row.allowed_mask[t / 32] >> (t % 32) & 1u)) logits[t] = -INFINITY;

    if (p.repetition_penalty != 1.0f) {
        auto penalise = [&](int32_t t) {
            float& l = logits[t];
            l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
        };
        std::vector<bool> seen(logits.size(), false);
        for (auto list : {row.prompt_tokens, row.output_tokens})
            for (int32_t t : list)
                if (t >= 0 && t < static_cast<int32_t>(logits.size()) && !seen[t]) {
                    seen[t] = true;
                    penalise(t);
                }
    }
    if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
        std::unordered_map<int32_t, int> counts;
        for (int32_t t : row.output_tokens)
            if (t >= 0 && t < static_cast<int32_t>(logits.size())) ++counts[t];
        for (const auto& [t, n] : counts) logits[t] -= p.presence_penalty + p.frequency_penalty * n;
    }
}

// The first of `ids` where the running sum of weight(i) passes target, or,
// if rounding leaves target past the end, the last with a nonzero weight.
template <class Weight>
int32_t draw_weighted(std::span<const int32_t> ids, double target, Weight weight) {
    double cum = 0;
    size_t last = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
        const double w = weight(i);
        if (!(w > 0)) continue;
        cum += w;
        last = i;
        if (target < cum) return ids[i];
    }
    return ids[last];
}

// Leviathan et al.'s verification of row.draft_token. p(x) = probs[i] /
// kept_total for x = kept[i], 0 elsewhere; q is row.draft_probs, or one-hot at
// the draft. Accepting d with probability min(1, p(d) / q(d)) and otherwise
// drawing from norm(max(0, p - q)) gives x with probability exactly p(x):
// P(x) = min(p(x), q(x)) + (1 - sum_y min(p(y), q(y))) * max(0, p(x) - q(x)) / sum_y max(0, p(y) - q(y)),
// and both sums over y equal 1 - sum_y min(p(y), q(y)).
int32_t verify_draft(std::span<const int32_t> kept, const std::vector<float>& probs, double kept_total,
                     const SamplingRow& row) {
    const SamplingParams& p = *row.params;
    const int32_t d = row.draft_token;
    const bool one_hot = row.draft_probs.empty();
    auto q = [&](int32_t token) { return one_hot ? (token == d ? 1.0 : 0.0) : double(row.draft_probs[token]); };
    double p_d = 0;
    for (size_t i = 0; i < kept.size(); ++i)
        if (kept[i] == d) p_d = probs[i] / kept_total;
    const double u = philox_uniform(p.seed, draw_stream(row.stream, Draw::Accept), row.position);
    if (u * q(d) < p_d) return d;  // u < p(d) / q(d), without dividing by a q(d) of 0

    auto residual = [&](size_t i) { return std::max(0.0, probs[i] / kept_total - q(kept[i])); };
    double total = 0;
    for (size_t i = 0; i < kept.size(); ++i) total += residual(i);
    const double v = philox_uniform(p.seed, draw_stream(row.stream, Draw::Recover), row.position);
    // p <= q everywhere only where p == q, whose draft is always accepted: rounding aside, unreachable.
    if (!(total > 0)) return draw_weighted(kept, v * kept_total, [&](size_t i) { return double(probs[i]); });
    return draw_weighted(kept, v * total, residual);
}

int32_t argmax(std::span<const float> x) {
    // First maximum, as llama2.c and llama.cpp break ties.
    return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

// The candidates a non-greedy row draws from, after its processors: ids in a
// fixed order, their weights probs[i] (unnormalised), the first `keep` kept.
struct Candidates {
    std::vector<int32_t> ids;
    std::vector<float> probs;
    int32_t keep = 0;
    double kept_total = 0;
};

Candidates candidates(std::span<const float> logits, const SamplingParams& p) {
    // Candidates in a fixed order (probability descending, then id), so the
    // outcome depends only on the logits and the random number.
    const int32_t vocab = static_cast<int32_t>(logits.size());
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    int32_t keep = vocab;
    if (p.top_k > 0 && p.top_k < vocab) {
        keep = p.top_k;
        std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), before);
    } else {
        std::sort(ids.begin(), ids.end(), before);
    }

    const float max_logit = logits[ids[0]];
    std::vector<float> probs(keep);
    double total = 0;
    for (int32_t i = 0; i < keep; ++i) {
        probs[i] = std::exp((logits[ids[i]] - max_logit) / p.temperature);
        total += probs[i];
    }
    if (p.top_p < 1.0f) {
        double cum = 0;
        int32_t n = 0;
        while (n < keep) {
            cum += probs[n++] / total;
            if (cum >= p.top_p) break;
        }
        keep = n;
    }
    if (p.min_p > 0.0f) {
        const float floor = p.min_p * probs[0];
        int32_t n = 1;
        while (n < keep && probs[n] >= floor) ++n;
        keep = n;
    }
    double kept_total = 0;
    for (int32_t i = 0; i < keep; ++i) kept_total += probs[i];
    return {std::move(ids), std::move(probs), keep, kept_total};
}

}  // namespace

int32_t sample_row(std::span<float> logits, const SamplingRow& row) {
    const SamplingParams& p = *row.params;
    apply_penalties(logits, row);
    if (p.greedy()) return argmax(logits);
    const Candidates c = candidates(logits, p);
    if (row.draft_token >= 0) return verify_draft({c.ids.data(), size_t(c.keep)}, c.probs, c.kept_total, row);

    const double target = philox_uniform(p.seed, row.stream, row.position) * c.kept_total;
    double cum = 0;
    for (int32_t i = 0; i < c.keep; ++i) {
        cum += c.probs[i];
        if (target < cum) return c.ids[i];
    }
    return c.ids[c.keep - 1];
}

void sampling_distribution(std::span<float> logits, const SamplingRow& row, std::span<float> probs) {
    const SamplingParams& p = *row.params;
    apply_penalties(logits, row);
    std::fill(probs.begin(), probs.end(), 0.0f);
    if (p.greedy()) {
        probs[size_t(argmax(logits))] = 1.0f;
        return;
    }
    const Candidates c = candidates(logits, p);
    for (int32_t i = 0; i < c.keep; ++i) probs[size_t(c.ids[i])] = float(c.probs[i] / c.kept_total);
}

int32_t draw_from(std::span<const float> probs, const SamplingRow& row, Draw purpose) {
    const double u = philox_uniform(row.params->seed, draw_stream(row.stream, purpose), row.position);
    double total = 0;
    for (float x : probs) total += x;
    const double target = u * total;
    double cum = 0;
    int32_t last = 0;
    for (size_t t = 0; t < probs.size(); ++t) {
        if (!(probs[t] > 0)) continue;
        cum += probs[t];
        last = int32_t(t);
        if (target < cum) return last;
    }
    return last;
}

}  // namespace minfer
