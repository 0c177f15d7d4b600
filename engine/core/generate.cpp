#include "engine/core/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "engine/core/plan_builder.h"

namespace minfer {

std::shared_ptr<const grammar::TokenVocabulary> token_vocabulary(const Tokenizer& tokenizer) {
    std::vector<std::string> bytes(size_t(tokenizer.vocab_size()));
    for (int32_t i = 0; i < tokenizer.vocab_size(); ++i) {
        const TokenType t = tokenizer.token_type(i);
        if (t != TokenType::Control && t != TokenType::Unused) bytes[size_t(i)] = tokenizer.token_to_piece(i);
    }
    return std::make_shared<const grammar::TokenVocabulary>(std::move(bytes));
}

std::vector<int32_t> default_stop_ids(const Tokenizer& tokenizer) {
    std::vector<int32_t> ids = tokenizer.end_of_generation_ids();
    if (tokenizer.bos_id() >= 0) ids.push_back(tokenizer.bos_id());
    return ids;
}

GenerateResult generate(ModelRunner& runner, BlockManager& blocks, int32_t context_len,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token) {
    using clock = std::chrono::steady_clock;
    const int32_t prompt_len = static_cast<int32_t>(prompt_ids.size());
    if (prompt_len == 0) throw std::invalid_argument("the prompt has no tokens");
    if (prompt_len > context_len)
        throw std::invalid_argument(
            fmt::format("the prompt is {} tokens, longer than the context of {} tokens", prompt_len, context_len));

    GenerateResult result;
    PlanBuilder planner(runner.limits().block_size);
    SequenceState seq;
    seq.tokens = prompt_ids;
    seq.num_prompt_tokens = prompt_len;
    const int32_t chunk = runner.limits().max_num_batched_tokens;

    auto t0 = clock::now();
    int32_t next = -1;
    std::vector<BlockCopy> copies;  // none: the sequence shares no block
    std::vector<uint32_t> mask;     // the grammar's allowed tokens, if any
    while (result.generated_ids.size() < size_t(std::max(options.max_new_tokens, 0))) {
        const int32_t count = std::min(seq.num_uncomputed(), chunk);
        const bool last_chunk = count == seq.num_uncomputed();
        if (!blocks.allocate(seq.blocks, seq.num_computed, seq.num_computed + count, copies))
            throw std::runtime_error("the KV pool has no room for the sequence");
        const int32_t first_row = planner.add_rows(seq, count);
        if (last_chunk) planner.add_logits_row(first_row + count - 1);
        runner.forward(planner.finish());
        seq.num_computed += count;
        if (!last_chunk) continue;  // more of the prompt to prefill

        const std::span<const int32_t> all(seq.tokens);
        if (options.constraint) options.constraint->mask(mask, options.stop_ids);
        const SamplingRow row{&options.sampling, 0, seq.num_computed, all.first(prompt_len), all.subspan(prompt_len),
                              {}, mask};
        next = runner.sample({&row, 1})[0];
        if (result.generated_ids.empty()) {
            const auto t1 = clock::now();
            result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
            t0 = t1;
        }
        const bool stop = std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end();
        // A token the grammar did not allow was drawn only because it allowed
        // none (a dead end): the text ends as cut short.
        if (options.constraint && (stop ? !options.constraint->accepting() : !options.constraint->accept(next))) break;
        result.generated_ids.push_back(next);
        seq.tokens.push_back(next);
        if (on_token) on_token(next);
        if (stop || (options.constraint && options.constraint->can_only_end())) {
            result.finish_reason = "stop";
            break;
        }
        if (seq.num_computed >= context_len) break;  // the next token has no position left
    }
    blocks.free(seq.blocks);
    if (result.finish_reason.empty()) result.finish_reason = "length";
    if (!result.generated_ids.empty())
        result.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return result;
}

}  // namespace minfer
