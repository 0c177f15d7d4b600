#include "engine/core/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/core/plan_builder.h"
#include "engine/core/sequence.h"
#include "kvcache/block_manager.h"

namespace minfer {

double PerplexityResult::ppl() const { return scored_tokens ? std::exp(nll_sum / scored_tokens) : 0.0; }

double PerplexityResult::ppl_stderr() const {
    if (scored_tokens < 2) return 0.0;
    const double n = double(scored_tokens), mean = nll_sum / n;
    const double var = std::max(0.0, nll_sq_sum / n - mean * mean);
    return ppl() * std::sqrt(var / (n - 1));
}

int32_t perplexity_chunks(size_t num_tokens, const PerplexityOptions& o) {
    if (o.n_ctx < 4) throw std::invalid_argument("the perplexity context must be at least 4 tokens");
    int32_t n = int32_t(num_tokens / size_t(o.n_ctx));
    if (o.max_chunks > 0) n = std::min(n, o.max_chunks);
    return n;
}

PerplexityResult perplexity(ModelRunner& runner, const std::vector<int32_t>& tokens, const PerplexityOptions& o,
                            const std::function<void(int32_t, const PerplexityResult&)>& on_chunk) {
    const int32_t chunks = perplexity_chunks(tokens.size(), o);
    if (chunks == 0)
        throw std::invalid_argument(fmt::format("the text has {} tokens, fewer than one chunk of {}", tokens.size(),
                                                o.n_ctx));
    const RunnerLimits& lim = runner.limits();
    const int32_t vocab = runner.model().config().vocab_size;
    const int32_t first_scored = o.n_ctx / 2;  // rows before it are context only
    const int32_t step_rows = std::min(lim.max_num_batched_tokens, lim.max_logits_rows);

    PerplexityResult result;
    BlockManager blocks(lim.num_kv_blocks, lim.block_size, /*enable_prefix_caching=*/false);
    PlanBuilder planner(lim.block_size);
    std::vector<BlockCopy> no_copies;
    for (int32_t c = 0; c < chunks; ++c) {
        SequenceState seq;  // the chunk, computed from scratch
        seq.tokens.assign(tokens.begin() + int64_t(c) * o.n_ctx, tokens.begin() + int64_t(c + 1) * o.n_ctx);
        if (o.bos_id >= 0) seq.tokens[0] = o.bos_id;
        seq.num_prompt_tokens = o.n_ctx;
        const std::vector<int32_t>& chunk = seq.tokens;
        if (!blocks.allocate(seq.blocks, 0, o.n_ctx, no_copies))
            throw std::invalid_argument("the KV pool cannot hold one perplexity chunk");
        double chunk_nll = 0;
        for (int32_t start = 0; start < o.n_ctx;) {
            // Context rows go in big steps; scored rows in steps that fit the logits buffer.
            const int32_t limit = start < first_scored ? std::min(lim.max_num_batched_tokens, first_scored - start)
                                                       : std::min(step_rows, o.n_ctx - 1 - start);
            if (limit <= 0) break;  // the last token predicts nothing inside the chunk
            seq.num_computed = start;
            const int32_t first_row = planner.add_rows(seq, limit);
            for (int32_t pos = std::max(start, first_scored); pos < start + limit; ++pos)
                planner.add_logits_row(first_row + pos - start);
            const StepPlan plan = planner.finish();
            runner.forward(plan);
            if (!plan.logits_rows.empty()) {
                const std::vector<float> logits = runner.logits();
                for (size_t i = 0; i < plan.logits_rows.size(); ++i) {
                    const int32_t pos = start + plan.logits_rows[i];
                    const double nll = -logprob_of(logits.data() + i * size_t(vocab), vocab, chunk[pos + 1], 0).logprob;
                    chunk_nll += nll;
                    result.nll_sq_sum += nll * nll;
                    ++result.scored_tokens;
                }
            }
            start += limit;
        }
        blocks.free(seq.blocks);
        result.chunk_nll.push_back(chunk_nll);
        result.nll_sum += chunk_nll;
        if (on_chunk) on_chunk(c, result);
    }
    return result;
}

}  // namespace minfer
