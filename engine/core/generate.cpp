#include "engine/core/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "engine/core/plan_builder.h"
#include "engine/spec/ngram_proposer.h"

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
    const SpeculativeConfig& spec = options.speculative;
    if (spec.enabled() && spec.method == SpeculativeMethod::Draft && !options.drafter)
        throw std::invalid_argument("generate: speculative method draft without a draft proposer");
    const int32_t max_new = std::max(options.max_new_tokens, 0);

    GenerateResult result;
    PlanBuilder planner(runner.limits().block_size);
    SequenceState seq;
    seq.tokens = prompt_ids;
    seq.num_prompt_tokens = prompt_len;
    const int32_t chunk = runner.limits().max_num_batched_tokens;

    auto t0 = clock::now();
    std::vector<BlockCopy> copies;              // none: the sequence shares no block
    std::vector<std::vector<float>> draft_probs;  // the draft model's q of each draft (sampled)
    std::vector<std::vector<uint32_t>> masks;   // the grammar's allowed tokens, a row each
    std::vector<int32_t> history;               // the tokens and the drafts
    // Appends a sampled token; false when generation ends with it.
    auto take = [&](int32_t next) {
        if (result.generated_ids.empty()) {
            const auto t1 = clock::now();
            result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
            t0 = t1;
        }
        const bool stop = std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end();
        // A token the grammar did not allow was drawn only because it allowed
        // none (a dead end): the text ends as cut short.
        if (options.constraint && (stop ? !options.constraint->accepting() : !options.constraint->accept(next)))
            return false;
        result.generated_ids.push_back(next);
        seq.tokens.push_back(next);
        if (on_token) on_token(next);
        if (stop || (options.constraint && options.constraint->can_only_end())) {
            result.finish_reason = "stop";
            return false;
        }
        // The next token needs a position, and room under max_new_tokens.
        return seq.num_tokens() <= context_len && int32_t(result.generated_ids.size()) < max_new;
    };
    bool going = max_new > 0;
    while (going) {
        const int32_t count = std::min(seq.num_uncomputed(), chunk);
        const bool last_chunk = count == seq.num_uncomputed();
        // Drafts for a decode, if every one accepted and the token after them still fit.
        seq.draft_tokens.clear();
        draft_probs.clear();
        const int32_t room = std::min({spec.num_speculative_tokens, max_new - int32_t(result.generated_ids.size()) - 1,
                                       context_len - seq.num_tokens() - 1, chunk - count,
                                       runner.limits().max_logits_rows - 1});
        if (spec.enabled() && count == 1 && room > 0) {
            if (options.drafter) {
                DraftRequest r{&seq, &options.sampling, 0, room, &draft_probs};
                options.drafter->propose({&r, 1}, blocks, copies);
            } else {
                seq.draft_tokens = ngram_propose(seq.tokens, spec.prompt_lookup_min, spec.prompt_lookup_max, room);
            }
        }
        const int32_t drafts = int32_t(seq.draft_tokens.size());
        if (!blocks.allocate(seq.blocks, seq.num_computed, seq.num_computed + count + drafts, copies))
            throw std::runtime_error("the KV pool has no room for the sequence");
        const int32_t first_row = planner.add_rows(seq, count + drafts);
        if (last_chunk)
            for (int32_t r = 0; r <= drafts; ++r) planner.add_logits_row(first_row + count - 1 + r);
        runner.forward(planner.finish());
        seq.num_computed += count;
        if (!last_chunk) continue;  // more of the prompt to prefill

        history = seq.tokens;
        history.insert(history.end(), seq.draft_tokens.begin(), seq.draft_tokens.end());
        const std::span<const int32_t> all(history);
        masks.resize(size_t(drafts) + 1);
        if (options.constraint) fill_draft_masks(*options.constraint, seq.draft_tokens, options.stop_ids, masks);
        std::vector<SamplingRow> rows;
        for (int32_t r = 0; r <= drafts; ++r) {
            const int32_t len = seq.num_tokens() + r;
            SamplingRow row{&options.sampling, 0, len, all.first(prompt_len), all.subspan(prompt_len, len - prompt_len),
                            {}, options.constraint ? std::span<const uint32_t>(masks[r]) : std::span<const uint32_t>{},
                            -1, {}};
            if (r < drafts) row.draft_token = seq.draft_tokens[r];
            if (r < int32_t(draft_probs.size())) row.draft_probs = draft_probs[r];
            rows.push_back(row);
        }
        const std::vector<int32_t> sampled = runner.sample(rows);
        const int32_t accepted = accepted_prefix(seq.draft_tokens.data(), sampled.data(), drafts);
        result.spec.record(drafts, accepted);
        for (int32_t r = 0; r <= accepted && going; ++r) {
            going = take(sampled[r]);
            if (r < accepted) ++seq.num_computed;  // an accepted draft's K/V is computed
        }
        if (drafts > 0) blocks.truncate(seq.blocks, seq.num_computed);  // the rejected drafts' slots
        seq.draft_computed = std::min(seq.draft_computed, seq.num_computed);
    }
    blocks.free(seq.blocks);
    if (result.finish_reason.empty()) result.finish_reason = "length";
    if (!result.generated_ids.empty())
        result.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return result;
}

}  // namespace minfer
