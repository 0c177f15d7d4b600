// LLMEngine's scheduling policies (priority, fair), a randomized stress test
// without leaks, and the engine thread with producers on several threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_fixture.h"

using namespace minfer;
using namespace engine_test;

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
    auto send = [&](const std::string& client, int n) {
        for (int i = 0; i < n; ++i) {
            GenerationOptions o;
            o.max_tokens = 8;
            o.ignore_eos = true;
            o.client = client;
            client_of[engine.add_request(random_prompt(rng, 24), o)] = client;
        }
    };
    send("heavy", 100);
    send("light", 10);
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
