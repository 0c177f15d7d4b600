#include "engine/core/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace minfer {

std::vector<int32_t> default_stop_ids(const Tokenizer& tokenizer) {
    std::vector<int32_t> ids = tokenizer.end_of_generation_ids();
    if (tokenizer.bos_id() >= 0) ids.push_back(tokenizer.bos_id());
    return ids;
}

StepPlan single_sequence_plan(const std::vector<int32_t>& tokens, int32_t start, int32_t count,
                              const BlockTable& table, bool want_logits) {
    StepPlan p;
    for (int32_t pos = start; pos < start + count; ++pos) {
        p.token_ids.push_back(tokens[pos]);
        p.positions.push_back(pos);
        p.slot_mapping.push_back(table.slot(pos));
    }
    p.query_start = {0, count};
    p.context_lens = {start + count};
    p.block_tables = table.blocks();
    p.max_blocks_per_seq = static_cast<int32_t>(table.blocks().size());
    if (want_logits) p.logits_rows = {count - 1};
    return p;
}

GenerateResult generate(ModelRunner& runner, BlockAllocator& blocks, int32_t context_len,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token) {
    using clock = std::chrono::steady_clock;
    const int32_t prompt_len = static_cast<int32_t>(prompt_ids.size());
    if (prompt_len == 0) throw std::invalid_argument("the prompt has no tokens");
    if (prompt_len > context_len)
        throw std::invalid_argument(
            fmt::format("the prompt is {} tokens, longer than the context of {} tokens", prompt_len, context_len));

    GenerateResult result;
    BlockTable table(blocks, runner.limits().block_size);
    std::vector<int32_t> tokens = prompt_ids;
    const int32_t chunk = runner.limits().max_num_batched_tokens;

    auto t0 = clock::now();
    int32_t done = 0;  // tokens whose K/V are in the cache
    int32_t next = -1;
    while (result.generated_ids.size() < size_t(std::max(options.max_new_tokens, 0))) {
        const int32_t todo = static_cast<int32_t>(tokens.size()) - done;
        const int32_t count = std::min(todo, chunk);
        const bool last_chunk = count == todo;
        table.reserve(done + count);
        const StepPlan plan = single_sequence_plan(tokens, done, count, table, last_chunk);
        runner.forward(plan);
        done += count;
        if (!last_chunk) continue;  // more of the prompt to prefill

        const SamplingRow row{&options.sampling, 0, done, {prompt_ids.data(), prompt_ids.size()},
                              {result.generated_ids.data(), result.generated_ids.size()}, {}, {}};
        next = runner.sample({&row, 1})[0];
        if (result.generated_ids.empty()) {
            const auto t1 = clock::now();
            result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
            t0 = t1;
        }
        result.generated_ids.push_back(next);
        tokens.push_back(next);
        if (on_token) on_token(next);
        if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end()) {
            result.finish_reason = "stop";
            break;
        }
        if (done >= context_len) break;  // the next token has no position left
    }
    if (result.finish_reason.empty()) result.finish_reason = "length";
    if (!result.generated_ids.empty())
        result.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return result;
}

}  // namespace minfer
