#include "engine/core/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/core/sequence.h"
#include "kvcache/block_allocator.h"

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
    BlockAllocator blocks(lim.num_kv_blocks);
    for (int32_t c = 0; c < chunks; ++c) {
        std::vector<int32_t> chunk(tokens.begin() + int64_t(c) * o.n_ctx, tokens.begin() + int64_t(c + 1) * o.n_ctx);
        if (o.bos_id >= 0) chunk[0] = o.bos_id;
        BlockTable table(blocks, lim.block_size);
        table.reserve(o.n_ctx);
        double chunk_nll = 0;
        for (int32_t start = 0; start < o.n_ctx;) {
            // Context rows go in big steps; scored rows in steps that fit the logits buffer.
            const int32_t limit = start < first_scored ? std::min(lim.max_num_batched_tokens, first_scored - start)
                                                       : std::min(step_rows, o.n_ctx - 1 - start);
            if (limit <= 0) break;  // the last token predicts nothing inside the chunk
            StepPlan plan;
            for (int32_t pos = start; pos < start + limit; ++pos) {
                plan.token_ids.push_back(chunk[pos]);
                plan.positions.push_back(pos);
                plan.slot_mapping.push_back(table.slot(pos));
                if (pos >= first_scored) plan.logits_rows.push_back(pos - start);
            }
            plan.query_start = {0, limit};
            plan.context_lens = {start + limit};
            plan.block_tables = table.blocks();
            plan.max_blocks_per_seq = int32_t(table.blocks().size());
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
        result.chunk_nll.push_back(chunk_nll);
        result.nll_sum += chunk_nll;
        if (on_chunk) on_chunk(c, result);
    }
    return result;
}

}  // namespace minfer
