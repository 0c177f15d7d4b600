#include "engine/core/sequence.h"

#include <algorithm>
#include <cmath>

namespace minfer {

TokenLogprob logprob_of(const float* logits, int32_t vocab, int32_t token, int32_t k) {
    float max_logit = -INFINITY;
    for (int32_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - max_logit);
    const double log_z = max_logit + std::log(sum);
    TokenLogprob lp{token, float(logits[token] - log_z), {}};
    if (k > 0) {
        std::vector<int32_t> ids(vocab);
        for (int32_t i = 0; i < vocab; ++i) ids[i] = i;
        k = std::min(k, vocab);
        std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        for (int32_t i = 0; i < k; ++i) lp.top.emplace_back(ids[i], float(logits[ids[i]] - log_z));
    }
    return lp;
}

// Rows of logits a step computing `count` more rows needs: one per sample
// drawn when the step reaches the last token (n for a first sample that
// forks), one per draft it verifies, plus one per prompt row whose next
// token's logprob is still wanted.
int32_t Sequence::logits_rows(int32_t count) const {
    int32_t rows = 0;
    if (num_computed + count >= num_tokens()) rows += slots() + (num_computed + count - num_tokens());
    if (sample_index == 0 && request->wants_prompt_logprobs()) {
        // The positions p in [num_computed, num_computed + count) with wants_prompt_logprob_row(p), counted at once.
        const int32_t first = std::max(num_computed, static_cast<int32_t>(request->prompt_logprobs.size()));
        const int32_t last = std::min(num_computed + count, num_prompt_tokens - 1);
        rows += std::max(0, last - first);
    }
    return rows;
}

std::unique_ptr<Sequence> make_sequence(Request& request, int32_t sample_index, int64_t id,
                                        const Tokenizer& tokenizer) {
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->request = &request;
    seq->sample_index = sample_index;
    seq->tokens = request.prompt;
    seq->num_prompt_tokens = static_cast<int32_t>(request.prompt.size());
    seq->arrival = request.arrival;
    seq->priority = request.options.priority;
    seq->client = request.options.client;
    seq->out.detokenizer = std::make_unique<IncrementalDetokenizer>(tokenizer, request.prompt);
    if (request.options.grammar)
        seq->constraint = std::make_unique<grammar::Constraint>(request.options.grammar, request.vocabulary,
                                                              request.options.grammar_triggers);
    return seq;
}

}  // namespace minfer
