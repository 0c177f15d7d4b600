// LLMEngine end to end on the CPU backend with the bundled model: batch
// invariance, preemption, prefix caching, parallel samples (copy-on-write),
// stop conditions, logprobs, policies, and a randomized stress test.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/core/engine_thread.h"
#include "engine/core/llm_engine.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/gguf/model_source.h"
#include "engine/text/tokenizer.h"

using namespace minfer;

namespace {

const std::string kModelPath = std::string(MINFER_SOURCE_DIR) + "/models/stories260K.gguf";

struct Fixture {
    std::unique_ptr<Backend> backend = make_cpu_backend(2);
    std::unique_ptr<Model> model = Model::load(kModelPath, *backend);
    std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(model->file());
};

Fixture& fixture() {
    static Fixture f;
    return f;
}

// The same model on a CPU backend that pads decode steps to the buckets CUDA graphs use.
Fixture& padded_fixture() {
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

EngineConfig small_config() {
    EngineConfig c;
    c.max_num_seqs = 64;
    c.max_num_batched_tokens = 256;
    c.num_kv_blocks = 2048;
    c.block_size = 16;
    return c;
}

// Runs the jobs together in one engine (adding job i before step `arrive[i]`,
// all at once if empty) and returns every job's result.
std::vector<Result> run(const std::vector<Job>& jobs, const EngineConfig& config, EngineStats* stats = nullptr,
                        const std::vector<int>& arrive = {}, Fixture& f = fixture()) {
    LLMEngine engine(*f.model, *f.tokenizer, config);
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

Result run_alone(const Job& job, const EngineConfig& config) { return run({job}, config)[0]; }

std::vector<int32_t> random_prompt(std::mt19937& rng, int len) {
    std::vector<int32_t> p = {1};
    std::uniform_int_distribution<int32_t> tok(3, 511);
    while (int(p.size()) < len) p.push_back(tok(rng));
    return p;
}

std::vector<Job> mixed_jobs(int count, uint32_t seed, bool sampled) {
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

}  // namespace

TEST_CASE("engine: 64 mixed requests in one batch give each one's output alone (greedy and seeded sampling)") {
    for (bool sampled : {false, true}) {
        CAPTURE(sampled);
        const auto jobs = mixed_jobs(64, sampled ? 7 : 3, sampled);
        const auto together = run(jobs, small_config());
        for (size_t i = 0; i < jobs.size(); ++i) {
            CAPTURE(i);
            const Result alone = run_alone(jobs[i], small_config());
            CHECK(together[i].samples.at(0).tokens == alone.samples.at(0).tokens);
            CHECK(together[i].samples.at(0).finish_reason == alone.samples.at(0).finish_reason);
        }
    }
}

TEST_CASE("engine: decode steps padded to graph buckets give exactly the unpadded outputs") {
    // The padding rows (position 0, no KV slot, block 0) must neither write the
    // KV pool nor change a real row; the CPU is batch-invariant, so even the
    // logprobs are bit-equal. 37 requests arrive over time, so the decode batch
    // walks through many buckets (1, 2, 4, 8, 16, 24, ...).
    auto jobs = mixed_jobs(37, 11, true);
    for (size_t i = 0; i < jobs.size(); i += 2) jobs[i].options.sampling.temperature = 0.0f;
    for (Job& j : jobs) j.options.logprobs = 2;
    std::vector<int> arrive;
    for (size_t i = 0; i < jobs.size(); ++i) arrive.push_back(int(i) * 3);
    EngineConfig config = small_config();
    config.num_kv_blocks = 48;  // preemptions too
    EngineStats plain_stats, padded_stats;
    const auto plain = run(jobs, config, &plain_stats, arrive);
    const auto padded = run(jobs, config, &padded_stats, arrive, padded_fixture());
    CHECK(padded_stats.num_preemptions > 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
        CAPTURE(i);
        const Sample &a = plain[i].samples.at(0), &b = padded[i].samples.at(0);
        CHECK(a.tokens == b.tokens);
        REQUIRE(a.logprobs.size() == b.logprobs.size());
        for (size_t t = 0; t < a.logprobs.size(); ++t) CHECK(a.logprobs[t].logprob == b.logprobs[t].logprob);
    }
}

TEST_CASE("engine: batch invariance holds for quantized weights too (int8 activations, K-quants)") {
    // The quantized matmul quantizes each activation row on its own, so a row's
    // result does not depend on the rows beside it either.
    for (const char* spec : {"tiny:q8_0", "tiny:q4_k_m", "tiny:bf16"}) {
        CAPTURE(spec);
        auto backend = make_cpu_backend(2);
        const auto model = Model::load(open_model_source("", spec), *backend);
        const auto tokenizer = Tokenizer::from_gguf(model->file());
        std::mt19937 rng(31);
        std::vector<std::pair<std::vector<int32_t>, GenerationOptions>> jobs;
        for (int i = 0; i < 16; ++i) {
            GenerationOptions o;
            o.max_tokens = 4 + int(rng() % 12);
            o.ignore_eos = true;
            o.sampling.temperature = 0.0f;
            std::vector<int32_t> prompt = {1};
            for (int t = 1 + int(rng() % 90); t > 0; --t) prompt.push_back(3 + int32_t(rng() % 1000));
            jobs.push_back({prompt, o});
        }
        auto run_all = [&](const std::vector<size_t>& which) {
            LLMEngine engine(*model, *tokenizer, small_config());
            std::map<uint64_t, size_t> index;
            for (size_t i : which) index[engine.add_request(jobs[i].first, jobs[i].second)] = i;
            std::map<size_t, std::vector<int32_t>> out;
            while (engine.has_unfinished())
                for (const RequestOutput& r : engine.step())
                    for (const SampleOutput& so : r.samples)
                        out[index.at(r.request_id)].insert(out[index.at(r.request_id)].end(), so.token_ids.begin(),
                                                           so.token_ids.end());
            return out;
        };
        std::vector<size_t> all(jobs.size());
        for (size_t i = 0; i < all.size(); ++i) all[i] = i;
        const auto together = run_all(all);
        for (size_t i = 0; i < jobs.size(); ++i) CHECK(together.at(i) == run_all({i}).at(i));
    }
}

TEST_CASE("engine: a KV pool too small for the load preempts, and every request still gets its output") {
    const auto jobs = mixed_jobs(24, 11, false);
    EngineConfig roomy = small_config();
    EngineConfig tight = small_config();
    tight.num_kv_blocks = 40;  // 640 token slots for 24 requests of up to 348 tokens
    tight.enable_prefix_caching = false;
    EngineStats st;
    const auto want = run(jobs, roomy);
    const auto got = run(jobs, tight, &st);
    CHECK(st.num_preemptions > 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
        CAPTURE(i);
        CHECK(got[i].samples.at(0).tokens == want[i].samples.at(0).tokens);
    }
    MESSAGE("preemptions: " << st.num_preemptions);
}

TEST_CASE("engine: requests sharing a prefix hit the prefix cache and give the same outputs") {
    std::mt19937 rng(5);
    const std::vector<int32_t> system = random_prompt(rng, 200);
    std::vector<Job> jobs;
    for (int i = 0; i < 16; ++i) {
        Job j;
        j.prompt = system;
        const auto tail = random_prompt(rng, 1 + i * 3);
        j.prompt.insert(j.prompt.end(), tail.begin() + 1, tail.end());
        j.options.max_tokens = 20;
        j.options.sampling.temperature = 0.0f;
        jobs.push_back(j);
    }
    EngineConfig no_cache = small_config();
    no_cache.enable_prefix_caching = false;
    const auto want = run(jobs, no_cache);
    // Arriving one step apart, later requests find the first one's blocks.
    std::vector<int> arrive;
    for (int i = 0; i < 16; ++i) arrive.push_back(i * 2);
    EngineStats st;
    const auto got = run(jobs, small_config(), &st, arrive);
    for (size_t i = 0; i < jobs.size(); ++i) CHECK(got[i].samples.at(0).tokens == want[i].samples.at(0).tokens);
    const double hit_rate = double(st.prefix_cache_hits) / double(st.prefix_cache_queries);
    MESSAGE("prefix cache: " << st.prefix_cache_hits << " of " << st.prefix_cache_queries << " prompt tokens hit ("
                             << 100 * hit_rate << "%)");
    // 15 of 16 requests can reuse the 192 tokens of the 12 whole blocks of the shared prefix.
    CHECK(st.prefix_cache_hits >= 15 * 192);
}

TEST_CASE("engine: a request that waits for blocks counts its prefix lookup once, when admitted") {
    // 24 blocks of 4 tokens. The first request grows to 34 + 40 tokens (19
    // blocks); the second (the same 32 leading tokens, then 30 of its own)
    // arrives when only 6 blocks are free and needs 8 beyond the shared ones,
    // so it waits, looking its prefix up each step, until the first finishes.
    std::mt19937 rng(11);
    const std::vector<int32_t> shared = random_prompt(rng, 32);
    Job first, second;
    first.prompt = shared;
    first.prompt.insert(first.prompt.end(), {7, 8});
    first.options.max_tokens = 40;
    second.prompt = shared;
    const auto own = random_prompt(rng, 31);
    second.prompt.insert(second.prompt.end(), own.begin() + 1, own.end());
    second.options.max_tokens = 4;
    for (Job* j : {&first, &second}) {
        j->options.ignore_eos = true;
        j->options.sampling.temperature = 0.0f;
    }
    EngineConfig c = small_config();
    c.block_size = 4;
    c.num_kv_blocks = 24;
    EngineStats st;
    run({first, second}, c, &st, {0, 35});
    REQUIRE(st.num_preemptions == 0);
    CHECK(st.prefix_cache_queries == 34 + 62);
    CHECK(st.prefix_cache_hits == 32);
}

TEST_CASE("engine: n parallel samples share the prompt's blocks (copy-on-write) and are reproducible") {
    std::mt19937 rng(9);
    Job greedy;
    greedy.prompt = random_prompt(rng, 37);  // a partial last block, shared then copied
    greedy.options.max_tokens = 30;
    greedy.options.ignore_eos = true;
    greedy.options.sampling.temperature = 0.0f;
    const Result one = run_alone(greedy, small_config());
    Job greedy4 = greedy;
    greedy4.options.n = 4;
    const Result four = run_alone(greedy4, small_config());
    REQUIRE(four.samples.size() == 4);
    for (const auto& [k, s] : four.samples) CHECK(s.tokens == one.samples.at(0).tokens);

    Job sampled = greedy4;
    sampled.options.sampling.temperature = 1.0f;
    sampled.options.sampling.seed = 42;
    sampled.options.has_seed = true;
    const Result a = run_alone(sampled, small_config());
    auto batch = mixed_jobs(10, 1, true);
    batch.insert(batch.begin() + 5, sampled);
    const Result b = run(batch, small_config())[5];
    std::set<std::vector<int32_t>> distinct;
    for (int k = 0; k < 4; ++k) {
        CHECK(a.samples.at(k).tokens == b.samples.at(k).tokens);
        distinct.insert(a.samples.at(k).tokens);
    }
    CHECK(distinct.size() > 1);  // different streams, different samples
}

TEST_CASE("engine: stop strings end the text before them and are never streamed") {
    Fixture& f = fixture();
    Job j;
    j.prompt = f.tokenizer->encode("Once upon a time", true);
    j.options.max_tokens = 100;
    j.options.sampling.temperature = 0.0f;
    const Result free_run = run_alone(j, small_config());
    const std::string text = free_run.samples.at(0).text;
    REQUIRE(text.size() > 40);
    const std::string stop = text.substr(20, 6);  // somewhere in the middle, likely across tokens
    j.options.stop = {"zzzz-never", stop};
    const Result stopped = run_alone(j, small_config());
    const Sample& s = stopped.samples.at(0);
    CHECK(s.finish_reason == "stop");
    CHECK(s.text == text.substr(0, text.find(stop)));
    for (const std::string& d : s.deltas) CHECK(d.find(stop) == std::string::npos);
    std::string joined;
    for (const std::string& d : s.deltas) joined += d;
    CHECK(joined == s.text);
}

TEST_CASE("engine: a text prompt is encoded as the tokenizer does, BOS first") {
    Fixture& f = fixture();
    GenerationOptions o;
    o.max_tokens = 12;
    o.sampling.temperature = 0.0f;
    Job j{f.tokenizer->encode("Lily went to", true), o};
    const Sample want = run_alone(j, small_config()).samples.at(0);
    LLMEngine engine(*f.model, *f.tokenizer, small_config());
    engine.add_request(std::string_view("Lily went to"), o);
    std::vector<int32_t> got;
    while (engine.has_unfinished())
        for (const RequestOutput& out : engine.step())
            for (const SampleOutput& s : out.samples) got.insert(got.end(), s.token_ids.begin(), s.token_ids.end());
    CHECK(got == want.tokens);
    CHECK(j.prompt.front() == f.tokenizer->bos_id());
}

TEST_CASE("engine: max_tokens, min_tokens, stop_token_ids, EOS") {
    Fixture& f = fixture();
    Job j;
    j.prompt = f.tokenizer->encode("Once upon a time", true);
    j.options.max_tokens = 400;
    j.options.sampling.temperature = 0.0f;
    const Sample natural = run_alone(j, small_config()).samples.at(0);
    REQUIRE(natural.finish_reason == "stop");  // the story ends with EOS/BOS
    const int32_t n = int32_t(natural.tokens.size());

    j.options.min_tokens = n + 5;
    const Sample longer = run_alone(j, small_config()).samples.at(0);
    CHECK(int32_t(longer.tokens.size()) >= n + 5);

    j.options.min_tokens = 0;
    j.options.stop_token_ids = {natural.tokens[3]};
    const Sample by_id = run_alone(j, small_config()).samples.at(0);
    CHECK(by_id.finish_reason == "stop");
    CHECK(by_id.tokens.back() == natural.tokens[3]);
    CHECK(by_id.tokens.size() <= 4);

    j.options.stop_token_ids = {};
    j.options.max_tokens = 7;
    const Sample capped = run_alone(j, small_config()).samples.at(0);
    CHECK(capped.finish_reason == "length");
    CHECK(capped.tokens.size() == 7);
}

TEST_CASE("engine: logprobs and prompt logprobs match the model's log-softmax") {
    Fixture& f = fixture();
    Job j;
    j.prompt = f.tokenizer->encode("The little dog ran", true);
    j.options.max_tokens = 5;
    j.options.sampling.temperature = 0.0f;
    j.options.logprobs = 3;
    j.options.echo = true;
    const Result r = run_alone(j, small_config());
    const Sample& s = r.samples.at(0);
    REQUIRE(s.logprobs.size() == s.tokens.size());
    REQUIRE(r.prompt_logprobs.size() == j.prompt.size() - 1);

    // The independent path: one forward of prompt + output, logits of every row.
    std::vector<int32_t> all = j.prompt;
    all.insert(all.end(), s.tokens.begin(), s.tokens.end());
    const int32_t n = int32_t(all.size()), bs = 16, blocks = n / bs + 1;
    ModelRunner runner(*f.model, {n, 1, blocks, bs, n});
    StepPlan plan;
    for (int32_t p = 0; p < n; ++p) {
        plan.token_ids.push_back(all[p]);
        plan.positions.push_back(p);
        plan.slot_mapping.push_back(p);
        plan.logits_rows.push_back(p);
    }
    plan.query_start = {0, n};
    plan.context_lens = {n};
    for (int32_t b = 0; b < blocks; ++b) plan.block_tables.push_back(b);
    plan.max_blocks_per_seq = blocks;
    runner.forward(plan);
    const std::vector<float> logits = runner.logits();
    const int32_t vocab = f.model->config().vocab_size;
    auto logprob = [&](int32_t row, int32_t token) {
        const float* l = logits.data() + size_t(row) * vocab;
        double m = *std::max_element(l, l + vocab), z = 0;
        for (int32_t i = 0; i < vocab; ++i) z += std::exp(l[i] - m);
        return l[token] - m - std::log(z);
    };
    for (size_t i = 0; i < r.prompt_logprobs.size(); ++i)
        CHECK(r.prompt_logprobs[i].logprob == doctest::Approx(logprob(int32_t(i), j.prompt[i + 1])).epsilon(1e-4));
    for (size_t i = 0; i < s.tokens.size(); ++i) {
        const int32_t row = int32_t(j.prompt.size() + i - 1);
        CHECK(s.logprobs[i].logprob == doctest::Approx(logprob(row, s.tokens[i])).epsilon(1e-4));
        REQUIRE(s.logprobs[i].top.size() == 3);
        CHECK(s.logprobs[i].top[0].first == s.tokens[i]);  // greedy: the sampled token is the top one
        CHECK(s.logprobs[i].top[0].second >= s.logprobs[i].top[1].second);
    }
}

TEST_CASE("engine: requests that can never fit are rejected at admission") {
    Fixture& f = fixture();
    EngineConfig c = small_config();
    c.max_model_len = 64;
    c.num_kv_blocks = 3;  // 48 token slots
    LLMEngine engine(*f.model, *f.tokenizer, c);
    GenerationOptions o;
    o.max_tokens = 10;
    CHECK_THROWS_AS(engine.add_request(std::vector<int32_t>(64, 5), o), RequestError);  // no room to generate
    CHECK_THROWS_AS(engine.add_request(std::vector<int32_t>(60, 5), o), RequestError);  // 70 > 64
    CHECK_THROWS_AS(engine.add_request(std::vector<int32_t>(40, 5), o), RequestError);  // 50 > the pool of 48
    CHECK_THROWS_AS(engine.add_request(std::vector<int32_t>{}, o), RequestError);
    CHECK_THROWS_AS(engine.add_request({1, 100000}, o), RequestError);
    o.n = 0;
    CHECK_THROWS_AS(engine.add_request({1, 5}, o), RequestError);
    o.n = 1;
    o.sampling.top_p = 0;
    CHECK_THROWS_AS(engine.add_request({1, 5}, o), RequestError);
    CHECK_FALSE(engine.has_unfinished());
}

TEST_CASE("engine: the priority policy serves lower values first") {
    EngineConfig c = small_config();
    c.policy = SchedulingPolicy::Priority;
    c.max_num_seqs = 1;  // one at a time: the order of service is the order of completion
    Fixture& f = fixture();
    LLMEngine engine(*f.model, *f.tokenizer, c);
    std::map<uint64_t, int> priority_of;
    for (int p : {5, 1, 3, 0, 4}) {
        GenerationOptions o;
        o.max_tokens = 3;
        o.priority = p;
        priority_of[engine.add_request({1, 100, 200}, o)] = p;
    }
    std::vector<int> order;
    while (engine.has_unfinished())
        for (const RequestOutput& out : engine.step())
            if (out.finished) order.push_back(priority_of.at(out.request_id));
    CHECK(order == std::vector<int>{0, 1, 3, 4, 5});
}

TEST_CASE("engine: fair policy (VTC) keeps a light client's service close to a heavy one's") {
    Fixture& f = fixture();
    EngineConfig c = small_config();
    c.policy = SchedulingPolicy::Fair;
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 64;
    LLMEngine engine(*f.model, *f.tokenizer, c);
    std::mt19937 rng(1);
    std::map<uint64_t, std::string> client_of;
    // The heavy client sends ten times the requests, all before the light one's.
    for (int i = 0; i < 100; ++i) {
        GenerationOptions o;
        o.max_tokens = 8;
        o.ignore_eos = true;
        o.client = "heavy";
        client_of[engine.add_request(random_prompt(rng, 24), o)] = "heavy";
    }
    for (int i = 0; i < 10; ++i) {
        GenerationOptions o;
        o.max_tokens = 8;
        o.ignore_eos = true;
        o.client = "light";
        client_of[engine.add_request(random_prompt(rng, 24), o)] = "light";
    }
    // VTC's bound: while both are backlogged, their counters differ by at most
    // about one request's cost per concurrent slot (input + 2 x output tokens).
    const double request_cost = 24 * 1.0 + 8 * 2.0;
    const double bound = 2 * c.max_num_seqs * request_cost;
    int light_done = 0, heavy_done = 0, heavy_done_when_light_finished = -1;
    std::vector<double> gaps;
    while (engine.has_unfinished()) {
        for (const RequestOutput& out : engine.step())
            if (out.finished) (client_of.at(out.request_id) == "light" ? light_done : heavy_done)++;
        if (light_done < 10) {
            const auto& counters = engine.client_counters();
            gaps.push_back(std::fabs(counters.at("heavy") - counters.at("light")));
        } else if (heavy_done_when_light_finished < 0) {
            heavy_done_when_light_finished = heavy_done;
        }
    }
    CHECK(light_done == 10);
    REQUIRE(!gaps.empty());
    const double worst = *std::max_element(gaps.begin(), gaps.end());
    MESSAGE("largest counter gap while the light client was backlogged: " << worst << " (bound " << bound << ")");
    CHECK(worst <= bound);
    // Under fcfs the light client would wait for all 100 heavy requests; here
    // it finishes while most of them are still queued.
    MESSAGE("heavy requests done when the light client's 10 were: " << heavy_done_when_light_finished);
    CHECK(heavy_done_when_light_finished < 30);
}

TEST_CASE("engine: randomized stress (arrivals, lengths, aborts, n > 1, stop strings, echo) without leaks") {
    Fixture& f = fixture();
    std::mt19937 rng(2024);
    for (int round = 0; round < 3; ++round) {
        EngineConfig c = small_config();
        c.num_kv_blocks = 60 + round * 40;
        c.max_num_seqs = 8 + round * 8;
        c.max_num_batched_tokens = 48 + round * 100;
        c.block_size = round == 1 ? 4 : 16;
        c.enable_prefix_caching = round != 2;
        LLMEngine engine(*f.model, *f.tokenizer, c);
        struct Live {
            GenerationOptions options;
            bool aborted = false;
            std::map<int32_t, Sample> samples;
        };
        std::map<uint64_t, Live> live;
        int added = 0, checked = 0;
        for (int step = 0; step < 3000 && (added < 80 || engine.has_unfinished()); ++step) {
            if (added < 80 && rng() % 3 == 0) {
                GenerationOptions o;
                o.max_tokens = 1 + int(rng() % 40);
                o.n = 1 + int(rng() % 3);
                o.sampling.temperature = rng() % 2 ? 0.0f : 0.8f;
                o.sampling.seed = rng();
                o.has_seed = true;
                o.ignore_eos = rng() % 2;
                if (rng() % 4 == 0) o.stop = {"the", "."};
                if (rng() % 5 == 0) {
                    o.logprobs = 2;
                    o.echo = true;
                }
                o.min_tokens = rng() % 4 == 0 ? 2 : 0;
                if (o.min_tokens > o.max_tokens) o.min_tokens = o.max_tokens;
                std::vector<int32_t> prompt = random_prompt(rng, 1 + int(rng() % 120));
                if (rng() % 3 == 0) prompt.resize(std::min<size_t>(prompt.size(), 40));  // shared-ish prefixes
                live[engine.add_request(prompt, o)].options = o;
                ++added;
            }
            if (!live.empty() && rng() % 25 == 0) {
                auto it = live.begin();
                std::advance(it, rng() % live.size());
                it->second.aborted = true;
                engine.abort(it->first);
            }
            for (const RequestOutput& out : engine.step()) {
                REQUIRE(live.count(out.request_id));
                Live& l = live[out.request_id];
                for (const SampleOutput& so : out.samples) {
                    Sample& smp = l.samples[so.index];
                    smp.tokens.insert(smp.tokens.end(), so.token_ids.begin(), so.token_ids.end());
                    smp.text += so.text;
                    if (so.finish_reason) smp.finish_reason = *so.finish_reason;
                }
                if (!out.finished) continue;
                // Every sample answered, within its limits.
                if (!l.aborted) CHECK(int32_t(l.samples.size()) == l.options.n);
                for (const auto& [k, smp] : l.samples) {
                    CHECK(!smp.finish_reason.empty());
                    CHECK(int32_t(smp.tokens.size()) <= l.options.max_tokens);
                    if (smp.finish_reason != "abort") CHECK(int32_t(smp.tokens.size()) >= l.options.min_tokens);
                    // (Before min_tokens stop strings are not looked for, as in vLLM.)
                    if (l.options.min_tokens == 0)
                        for (const std::string& stop : l.options.stop) CHECK(smp.text.find(stop) == std::string::npos);
                }
                ++checked;
                live.erase(out.request_id);
            }
        }
        CHECK(checked == 80);
        CHECK_FALSE(engine.has_unfinished());
        CHECK(live.empty());
        CHECK(engine.stats().kv_cache_usage == 0.0);
        MESSAGE("round " << round << ": " << engine.stats().steps << " steps, " << engine.stats().num_preemptions
                         << " preemptions");
    }
}

TEST_CASE("engine thread: requests from several threads get the same outputs; stop() answers the rest") {
    Fixture& f = fixture();
    const auto jobs = mixed_jobs(32, 21, false);
    const auto want = run(jobs, small_config());

    LLMEngine engine(*f.model, *f.tokenizer, small_config());
    EngineThread thread(engine);
    std::mutex m;
    std::condition_variable done_cv;
    std::vector<std::vector<int32_t>> got(jobs.size());
    std::vector<bool> done(jobs.size(), false);
    std::vector<std::thread> producers;
    for (int t = 0; t < 4; ++t)
        producers.emplace_back([&, t] {
            for (size_t i = t; i < jobs.size(); i += 4) {
                auto id = thread.submit(jobs[i].prompt, jobs[i].options, [&, i](const RequestOutput& out) {
                    std::lock_guard lock(m);
                    for (const SampleOutput& s : out.samples)
                        got[i].insert(got[i].end(), s.token_ids.begin(), s.token_ids.end());
                    if (out.finished) {
                        done[i] = true;
                        done_cv.notify_all();
                    }
                });
                CHECK(id > 0);
            }
        });
    for (auto& p : producers) p.join();
    {
        std::unique_lock lock(m);
        done_cv.wait(lock, [&] { return std::all_of(done.begin(), done.end(), [](bool d) { return d; }); });
    }
    for (size_t i = 0; i < jobs.size(); ++i) CHECK(got[i] == want[i].samples.at(0).tokens);

    // A rejected request throws on the submitting thread, before it is queued.
    GenerationOptions too_long;
    too_long.max_tokens = 100000;
    CHECK_THROWS_AS(thread.submit({1, 2}, too_long, [](const RequestOutput&) {}), RequestError);
    CHECK(thread.num_queued() == 0);

    // Long requests still running at stop() are answered with "abort".
    std::atomic<int> aborted{0};
    GenerationOptions slow;
    slow.max_tokens = 400;
    slow.ignore_eos = true;
    for (int i = 0; i < 3; ++i)
        thread.submit({1, 5, 6}, slow, [&](const RequestOutput& out) {
            for (const SampleOutput& s : out.samples)
                if (s.finish_reason == std::optional<std::string>("abort")) ++aborted;
        });
    thread.stop();
    CHECK(aborted == 3);
    CHECK_FALSE(engine.has_unfinished());
}
