// Shared by the engine's unit tests (test_engine*.cpp): the bundled model
// loaded once, a small engine configuration, and run(): jobs through one engine,
// each job's outputs gathered, with a check that no KV block leaks.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/core/engine_thread.h"
#include "engine/core/llm_engine.h"
#include "engine/gguf/model_source.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/text/tokenizer.h"

namespace engine_test {

using namespace minfer;

inline const std::string kModelPath = std::string(MINFER_SOURCE_DIR) + "/models/stories260K.gguf";

struct Fixture {
    std::unique_ptr<Backend> backend = make_cpu_backend(2);
    std::unique_ptr<Model> model = Model::load(kModelPath, *backend);
    std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model->file());
};

inline Fixture& fixture() {
    static Fixture f;
    return f;
}

// The same model on a CPU backend that pads decode steps to the buckets CUDA graphs use.
inline Fixture& padded_fixture() {
    static Fixture f{make_cpu_backend(2, true)};
    return f;
}

struct Sample {
    std::vector<int32_t> tokens;
    std::string text;
    std::string finish_reason;
    std::vector<TokenLogprob> logprobs;
    std::vector<std::string> deltas;  // text as it was streamed
};

struct Result {
    std::map<int32_t, Sample> samples;
    std::vector<TokenLogprob> prompt_logprobs;
};

struct Job {
    std::vector<int32_t> prompt;
    GenerationOptions options;
};

inline EngineConfig small_config() {
    EngineConfig c;
    c.max_num_seqs = 64;
    c.max_num_batched_tokens = 256;
    c.num_kv_blocks = 2048;
    c.block_size = 16;
    // Steps sized by token counts only: a pacer would size them by wall time,
    // and what a test sees would then depend on how busy the machine is.
    c.max_step_seconds = 0.0;
    return c;
}

// Runs the jobs together in one engine (adding job i before step `arrive[i]`,
// all at once if empty) and returns every job's result.
// draft: the draft model of speculative method Draft.
inline std::vector<Result> run(const std::vector<Job>& jobs, const EngineConfig& config, EngineStats* stats = nullptr,
                        const std::vector<int>& arrive = {}, Fixture& f = fixture(), const Model* draft = nullptr) {
    LLMEngine engine(*f.model, *f.tokenizer, config, draft);
    std::vector<Result> results(jobs.size());
    std::map<uint64_t, size_t> index;
    size_t added = 0;
    for (int step = 0; added < jobs.size() || engine.has_unfinished(); ++step) {
        while (added < jobs.size() && (arrive.empty() || arrive[added] <= step)) {
            index[engine.add_request(jobs[added].prompt, jobs[added].options)] = added;
            ++added;
        }
        for (const RequestOutput& out : engine.step()) {
            Result& r = results[index.at(out.request_id)];
            r.prompt_logprobs.insert(r.prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
            for (const SampleOutput& s : out.samples) {
                Sample& smp = r.samples[s.index];
                smp.tokens.insert(smp.tokens.end(), s.token_ids.begin(), s.token_ids.end());
                smp.text += s.text;
                if (!s.text.empty()) smp.deltas.push_back(s.text);
                smp.logprobs.insert(smp.logprobs.end(), s.logprobs.begin(), s.logprobs.end());
                if (s.finish_reason) smp.finish_reason = *s.finish_reason;
            }
        }
        REQUIRE(step < 100000);
    }
    if (stats) *stats = engine.stats();
    // No block leaks: every block is back in the pool (cached or free).
    CHECK(engine.stats().kv_cache_usage == 0.0);
    return results;
}

inline Result run_alone(const Job& job, const EngineConfig& config) { return run({job}, config)[0]; }

inline std::vector<int32_t> random_prompt(std::mt19937& rng, int len) {
    std::vector<int32_t> p = {1};
    std::uniform_int_distribution<int32_t> tok(3, 511);
    while (int(p.size()) < len) p.push_back(tok(rng));
    return p;
}

inline std::vector<Job> mixed_jobs(int count, uint32_t seed, bool sampled) {
    std::mt19937 rng(seed);
    std::vector<Job> jobs;
    for (int i = 0; i < count; ++i) {
        Job j;
        j.prompt = random_prompt(rng, std::uniform_int_distribution<int>(1, 300)(rng));
        j.options.max_tokens = std::uniform_int_distribution<int>(1, 48)(rng);
        j.options.ignore_eos = i % 3 == 0;
        if (sampled) {
            j.options.sampling.temperature = 0.9f;
            j.options.sampling.top_p = 0.95f;
            j.options.sampling.seed = 1000 + i;
            j.options.has_seed = true;
        } else {
            j.options.sampling.temperature = 0.0f;
        }
        jobs.push_back(j);
    }
    return jobs;
}

}  // namespace engine_test
