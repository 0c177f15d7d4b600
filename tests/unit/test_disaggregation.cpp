// Prefill/decode disaggregation below the HTTP layer: a prompt's KV blocks
// moved from one engine to another (engine/core/parked_kv.h and LLMEngine's
// KV calls), then over the wire of dist/kv_transfer.h (TCP, in one process).
// The decode side must give exactly what one engine gives alone, computing
// only each prompt's last token, and no block may leak on either side.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "dist/kv_transfer.h"
#include "engine_test_fixture.h"

using namespace minfer;
using namespace engine_test;

namespace {

// Runs a prefill engine's request (max_tokens 1) to its end: its prompt is parked under `id`.
void prefill(LLMEngine& p, const Job& job, const std::string& id) {
    GenerationOptions o = job.options;
    o.max_tokens = 1;
    o.kv_send_id = id;
    p.add_request(job.prompt, o);
    for (int i = 0; p.has_unfinished(); ++i) {
        p.step();
        REQUIRE(i < 10000);
    }
}

// What KVTransfer does over the wire, engine to engine: returns the blocks the decode engine already had.
int32_t move_kv(LLMEngine& p, LLMEngine& d, const std::string& id) {
    const std::optional<StagedKV> out = p.staged_kv()->take(id);
    REQUIRE(out);
    const LLMEngine::IncomingKV in = d.begin_incoming_kv(id, out->tokens, out->hashes);
    REQUIRE(int32_t(in.blocks.size()) == out->num_blocks);
    for (int32_t l = 0; l < p.kv_shape().n_layers; ++l)
        for (int32_t b = in.have; b < out->num_blocks; ++b)
            d.write_kv_blocks(std::span(&in.blocks[size_t(b)], 1), l, out->k(l, b), out->v(l, b));
    d.finish_incoming_kv(id);
    return in.have;
}

// The jobs, each prefilled by `p` and its KV moved to `d`, then decoded together by `d`.
std::vector<Result> run_disaggregated(const std::vector<Job>& jobs, LLMEngine& p, LLMEngine& d, int32_t* reused) {
    std::map<uint64_t, size_t> index;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const std::string id = "t" + std::to_string(i);
        prefill(p, jobs[i], id);
        *reused += move_kv(p, d, id);
        GenerationOptions o = jobs[i].options;
        o.kv_receive_id = id;
        index[d.add_request(jobs[i].prompt, o)] = i;
    }
    std::vector<Result> results(jobs.size());
    for (int i = 0; d.has_unfinished(); ++i) {
        for (const RequestOutput& out : d.step())
            for (const SampleOutput& s : out.samples) {
                Sample& smp = results[index.at(out.request_id)].samples[s.index];
                smp.tokens.insert(smp.tokens.end(), s.token_ids.begin(), s.token_ids.end());
                if (s.finish_reason) smp.finish_reason = *s.finish_reason;
            }
        REQUIRE(i < 100000);
    }
    return results;
}

}  // namespace

TEST_CASE("disaggregation: 64 mixed requests prefilled by one engine and decoded by another give one engine's outputs") {
    Fixture& f = fixture();
    for (bool sampled : {false, true}) {
        CAPTURE(sampled);
        std::vector<Job> jobs = mixed_jobs(64, sampled ? 11 : 5, sampled);
        // Some share a long prefix, so that the decode engine has their first blocks already.
        for (size_t i = 1; i < jobs.size(); i += 4) {
            jobs[i].prompt = jobs[0].prompt;
            jobs[i].prompt.resize(std::min<size_t>(jobs[i].prompt.size(), 40));
            jobs[i].prompt.insert(jobs[i].prompt.end(), {7, 8, 9, int32_t(10 + i)});
        }
        const std::vector<Result> alone = run(jobs, small_config());
        LLMEngine p(*f.model, *f.tokenizer, small_config());
        LLMEngine d(*f.model, *f.tokenizer, small_config());
        int32_t reused = 0;
        const std::vector<Result> split = run_disaggregated(jobs, p, d, &reused);
        for (size_t i = 0; i < jobs.size(); ++i) {
            CAPTURE(i);
            CHECK(split[i].samples.at(0).tokens == alone[i].samples.at(0).tokens);
            CHECK(split[i].samples.at(0).finish_reason == alone[i].samples.at(0).finish_reason);
        }
        CHECK(reused > 0);  // the shared prefixes' blocks were not sent again
        // The decode engine ran one token of each prompt (the last, for its logits), no more.
        CHECK(d.stats().prefill_computed_tokens == int64_t(jobs.size()));
        // Nothing is left parked, staged or held on either side.
        CHECK(p.stats().kv_parked_blocks == 0);
        CHECK(p.stats().kv_staged_bytes == 0);
        CHECK(d.stats().kv_parked_blocks == 0);
        CHECK(p.stats().kv_cache_usage == 0.0);
        CHECK(d.stats().kv_cache_usage == 0.0);
        CHECK(d.stats().kv_received_unused == 0);
    }
}

TEST_CASE("disaggregation: the prefill side frees its blocks at once, and staged or parked KV expires") {
    Fixture& f = fixture();
    EngineConfig c = small_config();
    c.kv_transfer_timeout = 0.05;
    LLMEngine p(*f.model, *f.tokenizer, c);
    Job job = mixed_jobs(1, 3, false)[0];
    job.prompt.resize(std::min<size_t>(job.prompt.size(), 50));
    prefill(p, job, "lost");
    // The K/V went to host memory in the step that ended the request: the pool holds nothing.
    CHECK(p.stats().kv_cache_usage == 0.0);
    const int64_t per_block = 2 * p.kv_shape().n_layers * int64_t(p.kv_shape().bytes_per_block());
    CHECK(p.stats().kv_staged_bytes == int64_t((job.prompt.size() + 15) / 16) * per_block);
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    p.expire_parked_kv();
    CHECK(p.stats().kv_staged_bytes == 0);
    CHECK(p.stats().kv_parked_expired == 1);

    LLMEngine d(*f.model, *f.tokenizer, c);
    d.begin_incoming_kv("never-claimed", job.prompt, {});
    CHECK(d.stats().kv_cache_usage > 0.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    d.step();  // every step expires what is due
    CHECK(d.stats().kv_cache_usage == 0.0);
}

TEST_CASE("disaggregation: a decode engine refuses a foreign hash chain and a transfer it has no room for") {
    Fixture& f = fixture();
    EngineConfig c = small_config();
    c.num_kv_blocks = 8;
    LLMEngine d(*f.model, *f.tokenizer, c);
    std::vector<int32_t> tokens(40, 5);
    const std::vector<uint64_t> wrong = {12345};
    CHECK_THROWS_AS(d.begin_incoming_kv("x", tokens, wrong), RequestError);
    CHECK_THROWS_AS(d.begin_incoming_kv("y", std::vector<int32_t>(200, 5), {}), RequestError);  // 13 blocks of 8
    CHECK(d.stats().kv_cache_usage == 0.0);
}

TEST_CASE("disaggregation: a request naming a missing transfer computes its prompt and gives the same output") {
    Fixture& f = fixture();
    const Job job = mixed_jobs(1, 9, false)[0];
    const Result alone = run_alone(job, small_config());
    LLMEngine d(*f.model, *f.tokenizer, small_config());
    GenerationOptions o = job.options;
    o.kv_receive_id = "nowhere";
    d.add_request(job.prompt, o);
    std::vector<int32_t> tokens;
    while (d.has_unfinished())
        for (const RequestOutput& out : d.step()) tokens.insert(tokens.end(), out.samples[0].token_ids.begin(), out.samples[0].token_ids.end());
    CHECK(tokens == alone.samples.at(0).tokens);
    CHECK(d.stats().kv_received_unused == 1);
    CHECK(d.stats().prefill_computed_tokens == int64_t(job.prompt.size()));
}

namespace {

// An engine on its own thread with the KV transfer, as `minfer serve` has them.
struct Instance {
    LLMEngine engine;
    EngineThread thread{engine};
    KVTransfer kv;
    Instance(const EngineConfig& c, bool listen)
        : engine(*fixture().model, *fixture().tokenizer, c),
          kv(thread, KVTransferOptions{listen ? 0 : -1, "127.0.0.1", false, 0, listen, std::chrono::milliseconds(5000)}) {}
    ~Instance() {
        kv.stop();
        thread.stop();
    }
    // Submits and waits for the request's tokens.
    std::vector<int32_t> generate(const std::vector<int32_t>& prompt, const GenerationOptions& o) {
        std::promise<void> done;
        std::vector<int32_t> tokens;
        thread.submit(prompt, o, [&](const RequestOutput& out) {
            for (const SampleOutput& s : out.samples) tokens.insert(tokens.end(), s.token_ids.begin(), s.token_ids.end());
            if (out.finished) done.set_value();
        });
        done.get_future().wait();
        return tokens;
    }
};

}  // namespace

TEST_CASE("disaggregation: KVTransfer over TCP moves a prompt's blocks and the decode side continues exactly") {
    const Job job = mixed_jobs(1, 21, true)[0];
    const Result alone = run_alone(job, small_config());
    Instance p(small_config(), false), d(small_config(), true);
    REQUIRE(d.kv.address().starts_with("tcp://127.0.0.1:"));
    GenerationOptions first = job.options;
    first.max_tokens = 1;
    first.kv_send_id = "abc";
    p.generate(job.prompt, first);
    const KVSendReport report = p.kv.send("abc", d.kv.address());
    CHECK(report.blocks_sent == int32_t((job.prompt.size() + 15) / 16));
    CHECK(report.bytes == int64_t(report.blocks_sent) * 2 * p.engine.kv_shape().n_layers *
                              int64_t(p.engine.kv_shape().bytes_per_block()));
    GenerationOptions rest = job.options;
    rest.kv_receive_id = "abc";
    CHECK(d.generate(job.prompt, rest) == alone.samples.at(0).tokens);
    CHECK(d.thread.stats().prefill_computed_tokens == 1);
    CHECK(p.kv.stats().sent_blocks == report.blocks_sent);
    CHECK(d.kv.stats().received_blocks == report.blocks_sent);
    CHECK(p.thread.stats().kv_staged_bytes == 0);
    CHECK(d.thread.stats().kv_parked_blocks == 0);
}

TEST_CASE("disaggregation: a failed KV send drops the staged prompt and says why") {
    const Job job = mixed_jobs(1, 22, false)[0];
    EngineConfig other = small_config();
    other.block_size = 32;
    Instance p(small_config(), false), d(other, true);
    GenerationOptions first = job.options;
    first.max_tokens = 1;
    first.kv_send_id = "a";
    p.generate(job.prompt, first);
    // The two sides cut the KV into blocks of different sizes: the receiver says so.
    CHECK_THROWS_WITH_AS(p.kv.send("a", d.kv.address()), doctest::Contains("KV layout"), KVTransferError);
    CHECK(p.thread.stats().kv_staged_bytes == 0);
    CHECK(d.thread.stats().kv_parked_blocks == 0);
    // Nobody listens there.
    first.kv_send_id = "b";
    p.generate(job.prompt, first);
    CHECK_THROWS_AS(p.kv.send("b", "tcp://127.0.0.1:1"), KVTransferError);
    CHECK(p.thread.stats().kv_staged_bytes == 0);
    CHECK_THROWS_AS(p.kv.send("never-parked", d.kv.address()), KVTransferError);
    CHECK(p.kv.stats().failed == 3);
}
