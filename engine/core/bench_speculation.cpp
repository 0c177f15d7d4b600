#include "engine/core/bench_speculation.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "engine/core/llm_engine.h"

namespace minfer {

namespace {

// One configuration, repeated; the tokens of the last run in `outputs`.
EngineDecodeRun run_engine(const Model& model, const Tokenizer& tokenizer, const LatencyOptions& o,
                           const std::vector<int32_t>& prompt, const SpeculativeConfig& spec, const Model* draft_model,
                           std::vector<std::vector<int32_t>>& outputs) {
    using clock = std::chrono::steady_clock;
    EngineConfig c;
    c.max_num_seqs = o.batch;
    c.max_num_batched_tokens = std::max<int32_t>(2048, o.batch * (1 + spec.num_speculative_tokens));
    c.max_model_len = int32_t(prompt.size()) + o.output_len;
    c.block_size = o.block_size;
    c.num_kv_blocks = o.batch * ((c.max_model_len + o.block_size - 1) / o.block_size) + 1;
    c.enable_prefix_caching = false;  // every run prefills its prompts
    c.enforce_eager = o.enforce_eager;
    c.kv_cache_dtype = o.kv_dtype;
    c.max_step_seconds = 0.0;
    c.speculative = spec;
    LLMEngine engine(model, tokenizer, c, draft_model);

    EngineDecodeRun r;
    std::vector<double> prefills, decodes;
    for (int32_t run = 0; run < o.warmup + o.repetitions; ++run) {
        GenerationOptions g;
        g.max_tokens = o.output_len;
        g.ignore_eos = true;
        g.sampling.temperature = 0;
        std::vector<uint64_t> ids;
        outputs.assign(size_t(o.batch), {});
        const int64_t steps_before = engine.stats().steps;
        const SpecDecodeStats spec_before = engine.stats().spec_decode;
        const auto t0 = clock::now();
        for (int32_t b = 0; b < o.batch; ++b) ids.push_back(engine.add_request(prompt, g));
        auto t1 = t0;
        bool all_started = false;
        while (engine.has_unfinished()) {
            for (const RequestOutput& out : engine.step())
                for (const SampleOutput& s : out.samples) {
                    auto& tokens = outputs[size_t(out.request_id - ids.front())];
                    tokens.insert(tokens.end(), s.token_ids.begin(), s.token_ids.end());
                }
            if (!all_started && std::all_of(outputs.begin(), outputs.end(), [](const auto& t) { return !t.empty(); })) {
                all_started = true;
                t1 = clock::now();
            }
        }
        const auto t2 = clock::now();
        if (run < o.warmup) continue;
        prefills.push_back(std::chrono::duration<double>(t1 - t0).count());
        decodes.push_back(std::chrono::duration<double>(t2 - t1).count());
        r.steps = engine.stats().steps - steps_before;
        r.spec = engine.stats().spec_decode.since(spec_before);
    }
    r.prefill_seconds = median(prefills);
    r.decode_seconds = median(decodes);
    r.decode_tok_s = r.decode_seconds > 0 ? double(o.batch) * (o.output_len - 1) / r.decode_seconds : 0;
    return r;
}

}  // namespace

SpeculationBenchResult bench_speculation(const Model& model, const Tokenizer& tokenizer, const LatencyOptions& o,
                                         const std::vector<int32_t>& prompt, const SpeculativeConfig& spec,
                                         const Model* draft_model) {
    if (o.batch <= 0 || o.output_len < 2 || o.repetitions <= 0 || o.warmup < 0 || prompt.empty())
        throw std::invalid_argument("bench speculation: batch and repetitions > 0, output >= 2, a prompt");
    std::vector<std::vector<int32_t>> plain_out, spec_out;
    SpeculationBenchResult r;
    r.plain = run_engine(model, tokenizer, o, prompt, SpeculativeConfig{}, nullptr, plain_out);
    r.speculative = run_engine(model, tokenizer, o, prompt, spec, draft_model, spec_out);
    for (size_t b = 0; b < plain_out.size(); ++b) {
        const auto& a = plain_out[b];
        const auto& c = spec_out[b];
        r.tokens += int64_t(a.size());
        r.same_tokens += std::mismatch(a.begin(), a.end(), c.begin(), c.end()).first - a.begin();
    }
    if (r.same_tokens != r.tokens && model.backend().name() == "cpu")
        throw std::runtime_error("bench speculation: greedy output with speculation differs from without (a bug)");
    r.speedup = r.plain.decode_tok_s > 0 ? r.speculative.decode_tok_s / r.plain.decode_tok_s : 0;
    return r;
}

}  // namespace minfer
