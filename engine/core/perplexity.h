// Perplexity over a text, as llama.cpp's llama-perplexity computes it: the
// tokens are cut into chunks of n_ctx; each chunk is evaluated from an empty
// cache (its first token replaced by BOS when the model adds one) and only the
// predictions of its second half are scored, so every scored token has at
// least n_ctx/2 tokens of context.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/model/model_runner.h"

namespace minfer {

struct PerplexityOptions {
    int32_t n_ctx = 512;          // tokens per chunk
    int32_t max_chunks = 0;       // 0: every whole chunk of the text
    int32_t bos_id = -1;          // replaces each chunk's first token when >= 0
};

struct PerplexityResult {
    std::vector<double> chunk_nll;   // summed negative log-likelihood (nats) per chunk
    int64_t scored_tokens = 0;
    double nll_sum = 0;              // over all chunks
    double nll_sq_sum = 0;           // of per-token NLLs, for the standard error
    double ppl() const;
    double ppl_stderr() const;       // first-order error of exp(mean NLL)
};

// Chunks the runner can evaluate: tokens.size() / n_ctx (capped by max_chunks).
int32_t perplexity_chunks(size_t num_tokens, const PerplexityOptions& options);

// Evaluates the chunks; on_chunk(i, result so far) after each.
PerplexityResult perplexity(ModelRunner& runner, const std::vector<int32_t>& tokens, const PerplexityOptions& options,
                            const std::function<void(int32_t, const PerplexityResult&)>& on_chunk = {});

}  // namespace minfer
