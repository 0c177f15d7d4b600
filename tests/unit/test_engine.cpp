// LLMEngine end to end on the CPU backend with the bundled model: batch
// invariance, preemption, prefix caching, parallel samples (copy-on-write),
// stop conditions and logprobs. Policies, the stress test and the engine
// thread are in test_engine_policies.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "engine_test_fixture.h"

using namespace minfer;
using namespace engine_test;

namespace {

// A greedy job on text encoded with BOS, at most max_tokens long.
Job greedy_job(const char* text, int32_t max_tokens) {
    Job j;
    j.prompt = fixture().tokenizer->encode(text, true);
    j.options.max_tokens = max_tokens;
    j.options.sampling.temperature = 0.0f;
    return j;
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
    Job j = greedy_job("Once upon a time", 100);
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
    Job j = greedy_job("Once upon a time", 400);
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
    Job j = greedy_job("The little dog ran", 5);
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
