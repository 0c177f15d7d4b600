// Speculative decoding: the n-gram proposer, the settings, the verification
// rule's distribution (one row, against the exact p), and the engine end to
// end: greedy output unchanged token for token under every scheduling path,
// and sampled output unchanged in distribution (two-sample chi-square tests
// over thousands of seeded requests).
#include "engine_test_fixture.h"

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "engine/gguf/gguf.h"
#include "engine/gguf/synth.h"
#include "engine/grammar/gbnf.h"
#include "engine/model/model_runner.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/spec_config.h"
#include "engine/spec/spec_stats.h"
#include "kernels/sampling.h"
#include "synth_test_util.h"

using namespace engine_test;

namespace {

// The chi-square statistic's critical value at about p = 1e-4 (z = 3.72),
// by Wilson and Hilferty's cube-root approximation.
double chi2_critical(int dof) {
    const double k = dof, z = 3.72;
    return k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
}

// Goodness of fit of `counts` (n draws) to `p`; bins expecting fewer than 5 are pooled.
bool fits(const std::map<int32_t, int>& counts, const std::vector<double>& p, int n, double* stat = nullptr) {
    double chi2 = 0, pooled_expected = 0, pooled_observed = 0;
    int bins = 0;
    for (size_t t = 0; t < p.size(); ++t) {
        const double expected = p[t] * n;
        const double observed = counts.contains(int32_t(t)) ? counts.at(int32_t(t)) : 0;
        if (expected < 5) {
            pooled_expected += expected;
            pooled_observed += observed;
            continue;
        }
        chi2 += (observed - expected) * (observed - expected) / expected;
        ++bins;
    }
    if (pooled_expected >= 5) {
        chi2 += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
        ++bins;
    } else if (pooled_observed > 5 * std::max(1.0, pooled_expected)) {
        return false;  // draws where there is (almost) no probability
    }
    if (stat) *stat = chi2;
    return chi2 < chi2_critical(std::max(1, bins - 1));
}

// Two samples of equal size from the same distribution? Bins with fewer than
// 50 draws in both together are pooled: fewer, fuller bins make the test
// sharper for the shifts a wrong rule makes (mass moved to or from drafts).
template <class Key>
bool same_distribution(const std::map<Key, int>& a, const std::map<Key, int>& b, double* stat = nullptr) {
    std::map<Key, std::pair<int, int>> both;
    for (const auto& [k, c] : a) both[k].first += c;
    for (const auto& [k, c] : b) both[k].second += c;
    double chi2 = 0;
    int bins = 0, rest_a = 0, rest_b = 0;
    auto add = [&](int x, int y) {
        chi2 += double(x - y) * (x - y) / (x + y);
        ++bins;
    };
    for (const auto& [k, c] : both) {
        if (c.first + c.second < 50) {
            rest_a += c.first;
            rest_b += c.second;
        } else {
            add(c.first, c.second);
        }
    }
    if (rest_a + rest_b > 0) add(rest_a, rest_b);
    if (stat) *stat = chi2;
    return chi2 < chi2_critical(std::max(1, bins - 1));
}

std::vector<double> softmax(const std::vector<float>& logits) {
    std::vector<double> p(logits.size());
    double z = 0;
    for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(double(logits[i]));
    for (double& x : p) x /= z;
    return p;
}

}  // namespace

TEST_CASE("spec: n-gram lookup proposes what followed the longest, latest match") {
    const std::vector<int32_t> t = {5, 6, 7, 8, 1, 6, 7, 9, 4, 6, 7};
    // Suffix [6, 7]: latest earlier match at 5 (followed by 9, 4, ...); the one at 1 is older.
    CHECK(ngram_propose(t, 1, 3, 3) == std::vector<int32_t>{9, 4, 6});
    // k past the end: only what there is.
    CHECK(ngram_propose(t, 2, 2, 10) == std::vector<int32_t>{9, 4, 6, 7});
    // A 3-gram [4, 6, 7] occurs nowhere earlier; min 3 finds nothing.
    CHECK(ngram_propose(t, 3, 3, 4).empty());
    // The longest n wins over a later shorter match: [1, 2, 3] ends at 2 earlier, [3] alone later.
    const std::vector<int32_t> u = {1, 2, 3, 4, 9, 3, 5, 1, 2, 3};
    CHECK(ngram_propose(u, 1, 3, 2) == std::vector<int32_t>{4, 9});
    CHECK(ngram_propose(u, 1, 1, 2) == std::vector<int32_t>{5, 1});
    CHECK(ngram_propose(std::vector<int32_t>{7}, 1, 4, 4).empty());
    CHECK(ngram_propose(u, 1, 3, 0).empty());
}

TEST_CASE("spec: settings from flags' values and vLLM's JSON, errors naming the setting") {
    SpeculativeConfig c = parse_speculative_config(
        R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 3})");
    CHECK(c.method == SpeculativeMethod::Ngram);
    CHECK(c.num_speculative_tokens == 5);
    CHECK(c.prompt_lookup_min == 2);
    CHECK(c.prompt_lookup_max == 3);
    CHECK(c.enabled());
    c = parse_speculative_config(R"({"model": "draft.gguf", "num_speculative_tokens": 3})");
    CHECK(c.method == SpeculativeMethod::Draft);
    CHECK(c.model == "draft.gguf");
    CHECK(parse_speculative_method("[ngram]") == SpeculativeMethod::Ngram);
    CHECK_THROWS_WITH_AS(parse_speculative_config("[1]"), doctest::Contains("JSON object"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_speculative_config(R"({"method": "medusa", "num_speculative_tokens": 2})"),
                         doctest::Contains("medusa"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": "4"})"),
                         doctest::Contains("num_speculative_tokens"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4, "k": 1})"),
                         doctest::Contains("unknown key \"k\""), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 0})"),
                         doctest::Contains("--num-speculative-tokens"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_speculative_config(
                             R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2})"),
                         doctest::Contains("--prompt-lookup-min"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_speculative_config(R"({"method": "draft", "num_speculative_tokens": 2})"),
                         doctest::Contains("--speculative-model"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_speculative_config(R"({"num_speculative_tokens": 2})"), doctest::Contains("method"),
                         std::invalid_argument);
}

TEST_CASE("spec: counters with vLLM's meanings") {
    SpecDecodeStats s;
    s.record(4, 2);
    s.record(3, 3);
    s.record(0, 0);  // no drafts: not a draft
    CHECK(s.num_drafts == 2);
    CHECK(s.num_draft_tokens == 7);
    CHECK(s.num_accepted_tokens == 5);
    CHECK(s.accepted_per_pos == std::vector<int64_t>{2, 2, 1, 0});
    CHECK(s.acceptance_rate() == doctest::Approx(5.0 / 7));
    CHECK(s.mean_acceptance_length() == doctest::Approx(3.5));
    const int32_t drafts[] = {4, 5, 6}, sampled[] = {4, 5, 7, 1};
    CHECK(accepted_prefix(drafts, sampled, 3) == 2);
}

TEST_CASE("spec: a verified row draws from p, whatever the draft and its q (chi-square against the exact p)") {
    const std::vector<float> logits = {1.0f, 0.2f, 2.0f, -0.5f, 1.6f, 0.0f};
    const std::vector<double> p = softmax(logits);
    SamplingParams params;
    params.seed = 11;
    const int n = 20000;
    // One-hot drafts (n-gram lookup): a likely token, an unlikely one, and each in turn.
    for (int32_t draft : {2, 3, 0}) {
        CAPTURE(draft);
        std::map<int32_t, int> counts;
        int kept = 0;
        for (int pos = 0; pos < n; ++pos) {
            std::vector<float> l = logits;
            SamplingRow row{&params, 0, pos};
            row.draft_token = draft;
            const int32_t t = sample_row(l, row);
            ++counts[t];
            kept += t == draft;
        }
        double stat = 0;
        CHECK_MESSAGE(fits(counts, p, n, &stat), "chi2 " << stat);
        CHECK(std::fabs(double(kept) / n - p[size_t(draft)]) < 0.02);  // accepted with probability p(d)
    }
    // A draft model's q, drafts drawn from q: still p.
    const std::vector<float> q_logits = {0.0f, 1.5f, 0.5f, 1.0f, -1.0f, 0.3f};
    const std::vector<double> q64 = softmax(q_logits);
    const std::vector<float> q(q64.begin(), q64.end());
    std::map<int32_t, int> counts;
    for (int pos = 0; pos < n; ++pos) {
        // The draft: inverse CDF of q on an independent number.
        const double u = philox_uniform(99, 0, pos);
        double cum = 0;
        int32_t d = 0;
        while (d < 5 && u >= (cum += q64[size_t(d)])) ++d;
        std::vector<float> l = logits;
        SamplingRow row{&params, 0, pos};
        row.draft_token = d;
        row.draft_probs = q;
        ++counts[sample_row(l, row)];
    }
    double stat = 0;
    CHECK_MESSAGE(fits(counts, p, n, &stat), "chi2 " << stat);

    // Temperature, top-p and a mask are part of p: a draft outside them is never kept.
    SamplingParams hot = params;
    hot.temperature = 0.7f;
    hot.top_p = 0.8f;
    const std::vector<uint32_t> mask = {0b101111u};  // token 4 masked off
    std::vector<double> pt(6, 0.0);
    {
        // p after processing: softmax(l / 0.7) over the unmasked, then the top-p nucleus.
        std::vector<float> scaled(6);
        for (int i = 0; i < 6; ++i) scaled[i] = i == 4 ? -INFINITY : logits[i] / 0.7f;
        const std::vector<double> s = softmax(scaled);
        std::vector<int32_t> order(6);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
        double cum = 0, kept = 0;
        for (int32_t t : order) {
            pt[t] = s[t];
            kept += s[t];
            if ((cum += s[t]) >= 0.8) break;
        }
        for (double& x : pt) x /= kept;
    }
    for (int32_t draft : {4, 2, 3}) {
        CAPTURE(draft);
        std::map<int32_t, int> c;
        for (int pos = 0; pos < n; ++pos) {
            std::vector<float> l = logits;
            SamplingRow row{&hot, 0, pos, {}, {}, {}, mask};
            row.draft_token = draft;
            ++c[sample_row(l, row)];
        }
        CHECK(c[4] == 0);
        CHECK_MESSAGE(fits(c, pt, n, &stat), "chi2 " << stat);
    }
    // Greedy rows return the argmax, which is the draft exactly when it is accepted.
    SamplingParams greedy;
    greedy.temperature = 0;
    for (int32_t draft : {2, 4}) {
        std::vector<float> l = logits;
        SamplingRow row{&greedy, 0, 0};
        row.draft_token = draft;
        CHECK(sample_row(l, row) == 2);
    }
}

namespace {

EngineConfig spec_config(int32_t k, EngineConfig c = small_config()) {
    c.speculative.method = SpeculativeMethod::Ngram;
    c.speculative.num_speculative_tokens = k;
    return c;
}

// Jobs over text that repeats itself, so that the proposer has something to find.
std::vector<Job> repetitive_jobs(int count, bool sampled) {
    const char* texts[] = {"Lily and Tom went to the park. Lily and Tom went to the park. Lily and Tom",
                           "Once upon a time, there was a little girl. Once upon a time, there was a little",
                           "The cat sat on the mat. The dog sat on the mat. The cat sat on the",
                           "Tim had a red ball. Tim had a blue ball. Tim had a"};
    std::vector<Job> jobs;
    for (int i = 0; i < count; ++i) {
        Job j;
        j.prompt = fixture().tokenizer->encode(texts[i % 4], true);
        j.options.max_tokens = 8 + (i * 7) % 40;
        j.options.ignore_eos = i % 5 == 0;
        j.options.sampling.temperature = sampled ? 1.0f : 0.0f;
        j.options.has_seed = true;
        j.options.sampling.seed = 500 + i;
        if (i % 6 == 1) j.options.logprobs = 2;
        if (i % 7 == 2) j.options.stop = {"park", "mat."};
        if (i % 9 == 3) j.options.min_tokens = 4;
        if (i % 11 == 4) j.options.sampling.repetition_penalty = 1.3f;
        jobs.push_back(j);
    }
    return jobs;
}

// 8,000 requests alternating between the prompts, 5 tokens each at
// temperature 1 and top-p 0.9, seeded first_seed, first_seed + 1, ...
std::vector<Job> seeded_jobs(const std::vector<std::vector<int32_t>>& prompts, uint64_t first_seed) {
    std::vector<Job> jobs;
    for (int i = 0; i < 8000; ++i) {
        Job j;
        j.prompt = prompts[size_t(i) % prompts.size()];
        j.options.max_tokens = 5;
        j.options.ignore_eos = true;
        j.options.sampling.temperature = 1.0f;
        j.options.sampling.top_p = 0.9f;
        j.options.has_seed = true;
        j.options.sampling.seed = first_seed + uint64_t(i);
        jobs.push_back(j);
    }
    return jobs;
}

// Room for a few hundred short requests at once.
EngineConfig roomy_config() {
    EngineConfig c = small_config();
    c.max_num_seqs = 256;
    c.max_num_batched_tokens = 4096;
    return c;
}

void check_same(const std::vector<Result>& a, const std::vector<Result>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        CAPTURE(i);
        REQUIRE(a[i].samples.size() == b[i].samples.size());
        for (const auto& [k, s] : a[i].samples) {
            const Sample& t = b[i].samples.at(k);
            CHECK(s.tokens == t.tokens);
            CHECK(s.text == t.text);
            CHECK(s.finish_reason == t.finish_reason);
            REQUIRE(s.logprobs.size() == t.logprobs.size());
            for (size_t j = 0; j < s.logprobs.size(); ++j) {
                CHECK(s.logprobs[j].token == t.logprobs[j].token);
                CHECK(s.logprobs[j].logprob == t.logprobs[j].logprob);
                CHECK(s.logprobs[j].top == t.logprobs[j].top);
            }
        }
    }
}

// The bundled model with noise added to every weight (`scale` times the
// tensor's RMS): a draft model with the target's vocabulary that often, but
// not always, agrees with it.
const Model& perturbed_model(float scale, Backend& backend = *fixture().backend) {
    static std::map<std::pair<float, Backend*>, std::unique_ptr<Model>> made;
    std::unique_ptr<Model>& m = made[{scale, &backend}];
    if (m) return *m;
    const GGUFFile src = GGUFFile::open(kModelPath);
    GGUFWriter w(src.alignment());
    for (const auto& [key, value] : src.metadata())
        if (key != "general.alignment") w.set_value(key, value);
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    for (const GGUFTensorInfo& t : src.tensors()) {
        REQUIRE(t.type == GGMLType::F32);
        std::vector<float> x(size_t(t.n_elements()));
        std::memcpy(x.data(), t.data, t.nbytes);
        double sq = 0;
        for (float v : x) sq += double(v) * v;
        const float rms = float(std::sqrt(sq / double(x.size())));
        for (float& v : x) v += scale * rms * noise(rng);
        std::vector<uint8_t> bytes(t.nbytes);
        std::memcpy(bytes.data(), x.data(), t.nbytes);
        w.add_tensor(t.name, t.type, t.ne, std::move(bytes));
    }
    m = Model::load(GGUFFile::from_bytes(w.to_bytes(), "perturbed"), backend);
    return *m;
}

EngineConfig draft_config(int32_t k, EngineConfig c = small_config()) {
    c.speculative.method = SpeculativeMethod::Draft;
    c.speculative.num_speculative_tokens = k;
    c.speculative.model = "perturbed";
    return c;
}

}  // namespace

TEST_CASE("spec: greedy with n-gram speculation is greedy without, token for token, on every scheduling path") {
    auto jobs = repetitive_jobs(48, false);
    const auto mixed = mixed_jobs(16, 5, false);
    jobs.insert(jobs.end(), mixed.begin(), mixed.end());
    jobs[3].options.n = 3;  // greedy forks: each speculates on its own
    EngineStats plain_stats, stats;
    const auto plain = run(jobs, small_config(), &plain_stats);
    for (int32_t k : {1, 8}) {
        CAPTURE(k);
        check_same(plain, run(jobs, spec_config(k), &stats));
        CHECK(stats.spec_decode.num_accepted_tokens > 0);
        MESSAGE("k=" << k << ": " << stats.steps << " steps (" << plain_stats.steps << " without), acceptance "
                     << stats.spec_decode.acceptance_rate());
        if (k == 1) CHECK(stats.steps < plain_stats.steps);  // accepted drafts save steps (k = 8 fills the budget)
        CHECK(stats.generation_tokens == plain_stats.generation_tokens);
    }
    // A tight pool (preemption drops drafts), tiny steps (drafts trimmed to the
    // budget), staggered arrivals (prefill chunks beside verifications).
    EngineConfig tight = spec_config(5);
    tight.num_kv_blocks = 24;
    tight.max_num_batched_tokens = 16;
    tight.max_num_seqs = 12;
    std::vector<int> arrive(jobs.size());
    for (size_t i = 0; i < arrive.size(); ++i) arrive[i] = int(i) * 3;
    check_same(plain, run(jobs, tight, &stats, arrive));
    CHECK(stats.num_preemptions > 0);
    CHECK(stats.spec_decode.num_accepted_tokens > 0);
    // Off by batch size: with more running than the limit, no step speculates.
    EngineConfig limited = spec_config(4);
    limited.speculative.disable_by_batch_size = 2;
    check_same(plain, run(jobs, limited, &stats));
    CHECK(stats.spec_decode.num_drafts < plain_stats.steps);
}

TEST_CASE("spec: streamed text is the same, stop strings inside an accepted run end it there") {
    Job j;
    j.prompt = fixture().tokenizer->encode("Lily and Tom went to the park. Lily and Tom went to the park. Lily", true);
    j.options.max_tokens = 60;
    j.options.sampling.temperature = 0;
    j.options.stop = {" the park"};
    j.options.ignore_eos = true;
    const Result plain = run_alone(j, small_config());
    EngineStats stats;
    const Result spec = run({j}, spec_config(6), &stats)[0];
    CHECK(plain.samples.at(0).finish_reason == "stop");
    CHECK(spec.samples.at(0).tokens == plain.samples.at(0).tokens);
    CHECK(spec.samples.at(0).text == plain.samples.at(0).text);
    CHECK(spec.samples.at(0).text.find("park") == std::string::npos);
    CHECK(stats.spec_decode.num_accepted_tokens > 0);
    // max_tokens inside a run: exactly max_tokens, finish "length".
    j.options.stop = {};
    for (int32_t m : {1, 2, 5, 13}) {
        j.options.max_tokens = m;
        const Result s = run({j}, spec_config(6))[0];
        CHECK(s.samples.at(0).tokens.size() == size_t(m));
        CHECK(s.samples.at(0).finish_reason == "length");
        CHECK(s.samples.at(0).tokens == run_alone(j, small_config()).samples.at(0).tokens);
    }
}

TEST_CASE("spec: grammar-constrained rows verify drafts under each draft's grammar state") {
    // Sentences of repeated words: the proposer finds the grammar's own text.
    auto g = std::make_shared<const grammar::Grammar>(
        grammar::parse_gbnf(R"(root ::= (" Lily" | " and" | " Tom" | " went" | " to" | " the" | " park" | "."){4,40})"));
    std::vector<Job> jobs = repetitive_jobs(8, false);
    for (size_t i = 0; i < jobs.size(); i += 2) jobs[i].options.grammar = g;
    for (Job& j : jobs) j.options.stop = {};
    EngineStats stats;
    const auto plain = run(jobs, small_config());
    check_same(plain, run(jobs, spec_config(4), &stats));
    CHECK(stats.spec_decode.num_accepted_tokens > 0);
}

TEST_CASE("spec: sampled output keeps its distribution (two-sample chi-square over 8,000 seeded requests)") {
    // temperature 1 and top-p 0.9 over text whose next words are uncertain but
    // repeat: the proposer drafts from the prompt, and the target accepts some
    // drafts and rejects others. (The first token is drawn at the prefill, with
    // no draft: the comparison is of the tokens after it.)
    // Two stories that repeat a frame with a different ending each time: the
    // proposer drafts the latest ending, which the model takes with middling
    // probability, so drafts are often accepted and often rejected.
    const std::vector<std::vector<int32_t>> prompts = {
        fixture().tokenizer->encode(
            "Lily and Tom played with the ball. Lily and Tom played with the doll. Lily and Tom played with the", true),
        fixture().tokenizer->encode("Lily had a cat. Lily had a dog. Lily had a ball. Lily had a", true)};
    const std::vector<Job> jobs = seeded_jobs(prompts, 90000);
    const EngineConfig c = roomy_config();
    EngineStats stats;
    const auto plain = run(jobs, c);
    const auto spec = run(jobs, spec_config(3, c), &stats);
    const SpecDecodeStats& sd = stats.spec_decode;
    MESSAGE("draft tokens " << sd.num_draft_tokens << ", accepted " << sd.num_accepted_tokens);
    CHECK(sd.num_draft_tokens > 8000);
    CHECK(sd.acceptance_rate() > 0.1);  // drafts accepted...
    CHECK(sd.acceptance_rate() < 0.8);  // ...and rejected: both halves of the rule are at work
    int differ = 0;
    for (int text = 0; text < 2; ++text) {
        CAPTURE(text);
        std::map<int32_t, int> at[4][2];  // tokens 2 to 5 (the first has no draft)
        for (size_t i = size_t(text); i < jobs.size(); i += 2) {
            const auto& a = plain[i].samples.at(0).tokens;
            const auto& b = spec[i].samples.at(0).tokens;
            REQUIRE(a.size() == 5);
            REQUIRE(b.size() == 5);
            for (int k = 0; k < 4; ++k) {
                ++at[k][0][a[size_t(k) + 1]];
                ++at[k][1][b[size_t(k) + 1]];
            }
            differ += a != b;
        }
        for (int k = 0; k < 4; ++k) {
            double stat = 0;
            CHECK_MESSAGE(same_distribution(at[k][0], at[k][1], &stat), "token " << k + 2 << ": chi2 " << stat);
        }
    }
    CHECK(differ > 800);  // other random numbers: the test compares distributions, not draws
}

TEST_CASE("spec: greedy with a draft model is greedy without, token for token, on every scheduling path") {
    auto jobs = repetitive_jobs(32, false);
    const auto mixed = mixed_jobs(16, 9, false);
    jobs.insert(jobs.end(), mixed.begin(), mixed.end());
    jobs[3].options.n = 3;
    auto g = std::make_shared<const grammar::Grammar>(
        grammar::parse_gbnf(R"(root ::= (" Lily" | " and" | " Tom" | " went" | " to" | " the" | " park" | "."){4,40})"));
    jobs[6].options.grammar = g;
    jobs[6].options.stop = {};
    EngineStats plain_stats, stats;
    const auto plain = run(jobs, small_config(), &plain_stats);
    const Model& draft = perturbed_model(0.1f);
    for (int32_t k : {1, 6}) {
        CAPTURE(k);
        check_same(plain, run(jobs, draft_config(k), &stats, {}, fixture(), &draft));
        MESSAGE("draft k=" << k << ": acceptance " << stats.spec_decode.acceptance_rate() << ", " << stats.steps
                           << " steps (" << plain_stats.steps << " without)");
        CHECK(stats.spec_decode.acceptance_rate() > 0.15);
        CHECK(stats.spec_decode.acceptance_rate() < 0.9);  // the draft differs from the target
    }
    // The target as its own draft: every greedy draft is accepted, those of the
    // rows min_tokens holds EOS back on and of the grammar-constrained one too
    // (the draft's q is processed as the target's p, mask and all).
    // One more job holds back, for its whole length, the token its free run
    // drafts first: the target never samples it, so a draft that did would be refused.
    std::vector<Job> held = jobs;
    Job hold = jobs[0];
    const std::vector<int32_t>& free_tokens = plain[0].samples.at(0).tokens;
    REQUIRE(free_tokens.size() > 2);
    hold.options.stop_token_ids = {free_tokens[1] != free_tokens[0] ? free_tokens[1] : free_tokens[2]};
    hold.options.min_tokens = hold.options.max_tokens;
    held.push_back(hold);
    const auto held_plain = run(held, small_config());
    check_same(held_plain, run(held, draft_config(4), &stats, {}, fixture(), fixture().model.get()));
    CHECK(stats.spec_decode.num_draft_tokens > 0);
    CHECK(stats.spec_decode.num_accepted_tokens == stats.spec_decode.num_draft_tokens);
    // A tight pool, tiny steps and staggered arrivals: preemption drops drafts
    // and the draft's K/V; copy-on-write copies reach both pools.
    EngineConfig tight = draft_config(4);
    tight.num_kv_blocks = 24;
    tight.max_num_batched_tokens = 16;
    tight.max_num_seqs = 12;
    std::vector<int> arrive(jobs.size());
    for (size_t i = 0; i < arrive.size(); ++i) arrive[i] = int(i) * 3;
    check_same(plain, run(jobs, tight, &stats, arrive, fixture(), &draft));
    CHECK(stats.num_preemptions > 0);
    CHECK(stats.spec_decode.num_accepted_tokens > 0);
}

TEST_CASE("spec: sampled output with a draft model keeps its distribution (chi-square over 8,000 seeded requests)") {
    const std::vector<std::vector<int32_t>> prompts = {
        fixture().tokenizer->encode("Lily and Tom played with the ball. Lily and", true),
        fixture().tokenizer->encode("Once upon a time, there was a", true)};
    const std::vector<Job> jobs = seeded_jobs(prompts, 70000);
    const EngineConfig c = roomy_config();
    EngineStats stats;
    const auto plain = run(jobs, c);
    const auto spec = run(jobs, draft_config(3, c), &stats, {}, fixture(), &perturbed_model(0.1f));
    const SpecDecodeStats& sd = stats.spec_decode;
    MESSAGE("draft model: draft tokens " << sd.num_draft_tokens << ", acceptance " << sd.acceptance_rate());
    CHECK(sd.num_draft_tokens > 8000);
    CHECK(sd.acceptance_rate() > 0.2);
    CHECK(sd.acceptance_rate() < 0.9);
    for (int text = 0; text < 2; ++text) {
        CAPTURE(text);
        for (int k = 1; k < 5; ++k) {
            std::map<int32_t, int> a, b;
            for (size_t i = size_t(text); i < jobs.size(); i += 2) {
                ++a[plain[i].samples.at(0).tokens.at(size_t(k))];
                ++b[spec[i].samples.at(0).tokens.at(size_t(k))];
            }
            double stat = 0;
            CHECK_MESSAGE(same_distribution(a, b, &stat), "token " << k + 1 << ": chi2 " << stat);
        }
    }
}

TEST_CASE("spec: a draft model needs the target's vocabulary, token for token") {
    const Tokenizer& target = *fixture().tokenizer;
    CHECK_NOTHROW(check_draft_vocabulary(target, target));
    const GGUFFile other = GGUFFile::from_bytes(synth_header(synth_test::kSmallLlama3, SynthDType::F32, 0, false).to_bytes());
    CHECK_THROWS_WITH_AS(check_draft_vocabulary(target, *Tokenizer::from_gguf(other)),
                         doctest::Contains("same vocabulary"), std::invalid_argument);
    EngineConfig c = draft_config(2);
    CHECK_THROWS_WITH_AS(LLMEngine(*fixture().model, target, c), doctest::Contains("no draft model"),
                         std::invalid_argument);
}

TEST_CASE("spec: a verification step is recorded by bucket of sequences, rows a sequence and context") {
    // Two sequences of 1 + 2 drafts each (contexts 20 and 7), as PlanBuilder makes them.
    StepPlan plan;
    plan.token_ids = {5, 6, 7, 8, 9, 10};
    plan.positions = {17, 18, 19, 4, 5, 6};
    plan.slot_mapping = {17, 18, 19, 36, 37, 38};
    plan.query_start = {0, 3, 6};
    plan.context_lens = {20, 7};
    plan.max_blocks_per_seq = 2;
    plan.block_tables = {0, 1, 2, -1};
    plan.logits_rows = {0, 1, 2, 3, 4, 5};
    RunnerLimits limits;
    limits.max_num_seqs = 64;
    limits.max_num_batched_tokens = 512;
    limits.max_logits_rows = 512;
    limits.block_size = 16;
    const DecodeBucket b = decode_bucket(plan, limits);
    CHECK(b.seqs == 2);
    CHECK(b.rows_per_seq == 3);
    CHECK(b.blocks_per_seq == 16);  // 256 tokens of context at least
    DecodeBucket plain_decode = b;
    plain_decode.rows_per_seq = 1;
    CHECK(b.key() != plain_decode.key());

    // Three sequences pad to four: the fourth has three rows of its own, at
    // positions 0..2, writing no K/V and reading block 0.
    plan.token_ids.insert(plan.token_ids.end(), {1, 2, 3});
    plan.positions.insert(plan.positions.end(), {30, 31, 32});
    plan.slot_mapping.insert(plan.slot_mapping.end(), {62, 63, 64});
    plan.query_start.push_back(9);
    plan.context_lens.push_back(33);
    plan.max_blocks_per_seq = 3;
    plan.block_tables = {0, 1, -1, 2, -1, -1, 3, 4, 5};
    plan.logits_rows.insert(plan.logits_rows.end(), {6, 7, 8});
    const DecodeBucket b3 = decode_bucket(plan, limits);
    REQUIRE(b3.seqs == 4);
    REQUIRE(b3.rows_per_seq == 3);
    const StepPlan padded = pad_decode_plan(plan, b3);
    CHECK(padded.num_tokens() == 12);
    CHECK(padded.query_start == std::vector<int32_t>{0, 3, 6, 9, 12});
    CHECK(padded.context_lens == std::vector<int32_t>{20, 7, 33, 3});
    CHECK(std::vector<int32_t>(padded.positions.begin() + 9, padded.positions.end()) == std::vector<int32_t>{0, 1, 2});
    CHECK(std::vector<int32_t>(padded.slot_mapping.begin() + 6, padded.slot_mapping.end()) ==
          std::vector<int32_t>{62, 63, 64, -1, -1, -1});
    CHECK(padded.logits_rows.size() == 12);
    CHECK(padded.block_tables.at(size_t(2) * b3.blocks_per_seq + 2) == 5);
    CHECK(padded.block_tables.at(size_t(2) * b3.blocks_per_seq + 3) == -1);
    CHECK(padded.block_tables.at(size_t(3) * b3.blocks_per_seq) == 0);

    // Not recorded: sequences of different rows, a row without logits, too many rows a sequence.
    StepPlan uneven = plan;
    uneven.query_start = {0, 3, 5, 9};
    CHECK(decode_bucket(uneven, limits).seqs == 0);
    StepPlan fewer_logits = plan;
    fewer_logits.logits_rows.pop_back();
    CHECK(decode_bucket(fewer_logits, limits).seqs == 0);
    limits.max_num_batched_tokens = 8;  // three sequences of three rows do not fit a padded bucket
    CHECK(decode_bucket(plan, limits).seqs == 0);
}

TEST_CASE("spec: on a backend that records steps, n-gram verification steps are padded to buckets") {
    // The padding sequences must neither write the KV pool nor change a real
    // row: the CPU is batch-invariant, so even logprobs are bit-equal.
    auto jobs = repetitive_jobs(24, false);
    for (Job& j : jobs) j.options.logprobs = 1;
    Fixture& f = padded_fixture();
    const auto plain = run(jobs, small_config());
    EngineStats stats;
    check_same(plain, run(jobs, spec_config(3), &stats, {}, f));
    CHECK(stats.spec_decode.num_accepted_tokens > 0);
}

TEST_CASE("spec: a draft model on a backend that records steps (decode steps padded to graph buckets)") {
    // The draft's passes are decode steps, recorded beside the target's; its
    // catch-up rows (one a sequence after a fully accepted run) want no logits
    // and must not be taken for decodes (they crashed the CUDA backend).
    auto jobs = repetitive_jobs(16, false);
    Fixture& f = padded_fixture();
    const auto plain = run(jobs, small_config(), nullptr, {}, f);
    EngineStats stats;
    check_same(plain, run(jobs, draft_config(3), &stats, {}, f, f.model.get()));
    CHECK(stats.spec_decode.num_accepted_tokens == stats.spec_decode.num_draft_tokens);
    check_same(plain, run(jobs, draft_config(3), &stats, {}, f, &perturbed_model(0.1f, *f.backend)));
    CHECK(stats.spec_decode.num_accepted_tokens > 0);
}
