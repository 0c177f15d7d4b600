// minfer_gpu_model: stories260K end to end on the GPU.
//
// Loads the model on the CPU and the CUDA backend, generates every case of
// llama2.c run.c's greedy reference on both, and checks that the GPU's ids
// equal the reference's and the CPU's (the reference README: n = steps -
// len(prompt_ids) + 1 new tokens, stopping at the default stop ids). Then
// compares the logits of every row of a long prefill step and of a two-step
// batch of several sequences (prefill chunks next to decodes), GPU against CPU.
// One line per case, then "N passed, M failed"; exit code 1 on any failure.
//
// With --synthetic PRESET:DTYPE instead: a random-weight model of a real
// shape (e.g. llama3-8b:bf16) on both backends; one prefill of random tokens
// and decode steps fed the CPU's greedy token, the logits of every step
// compared, and the greedy tokens required to agree wherever the CPU's top-2
// margin is clear of the error (random weights have near ties).
//
// Usage: minfer_gpu_model [--model PATH] [--reference PATH]
//        minfer_gpu_model --synthetic PRESET:DTYPE|FILE.gguf [--threshold REL]
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/generate.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/gguf/model_source.h"
#include "engine/text/tokenizer.h"
#include "kernels/cuda/cuda_backend.h"
#include "gpu_skip.h"
#include "kvcache/block_manager.h"
#include "../rel_error.h"

using namespace minfer;

namespace {

constexpr double kLogitsThreshold = 1e-4;  // a whole fp32 forward, summation orders differing

struct Case {
    std::string prompt;
    int32_t steps = 0;
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> generated_ids;
};

std::vector<Case> read_cases(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    const boost::json::value doc = boost::json::parse(text.str());
    std::vector<Case> cases;
    for (const boost::json::value& v : doc.as_array()) {
        const boost::json::object& o = v.as_object();
        Case c;
        c.prompt = std::string(o.at("prompt").as_string());
        c.steps = boost::json::value_to<int32_t>(o.at("steps"));
        c.prompt_ids = boost::json::value_to<std::vector<int32_t>>(o.at("prompt_ids"));
        c.generated_ids = boost::json::value_to<std::vector<int32_t>>(o.at("generated_ids"));
        cases.push_back(std::move(c));
    }
    return cases;
}

// Positions where a and b differ, counting a length difference as mismatches.
int32_t mismatches(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    int32_t n = int32_t(std::max(a.size(), b.size()) - std::min(a.size(), b.size()));
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
    return n;
}

using minfer::test::rel_error;

struct Tally {
    int passed = 0;
    int failed = 0;
    void line(const char* op, const std::string& shape, double err, double threshold, const std::string& note = "") {
        const bool ok = err <= threshold;
        std::printf("%-9s %-58s %10.3e %8.1e  %s%s\n", op, shape.c_str(), err, threshold, ok ? "PASS" : "FAIL",
                    note.c_str());
        std::fflush(stdout);
        ++(ok ? passed : failed);
    }
};

std::vector<int32_t> generate_greedy(const Model& model, const Case& c, int32_t batch_tokens, int32_t block_size,
                                     const std::vector<int32_t>& stop_ids) {
    const int32_t ctx = model.config().context_len;
    const int32_t blocks = (ctx + block_size - 1) / block_size;
    BlockManager manager(blocks, block_size, false);
    ModelRunner runner(model, {batch_tokens, 1, blocks, block_size});
    GenerateOptions options;
    options.max_new_tokens = c.steps - int32_t(c.prompt_ids.size()) + 1;
    options.sampling.temperature = 0.0f;
    options.stop_ids = stop_ids;
    return generate(runner, manager, ctx, c.prompt_ids, options).generated_ids;
}

// One sequence's part of a step: rows [start, start + count) of its tokens.
struct Part {
    const std::vector<int32_t>* tokens;
    const std::vector<int32_t>* blocks;  // its block table
    int32_t start;
    int32_t count;
};

// A step over several sequences that wants the logits of every row.
StepPlan batch_plan(const std::vector<Part>& parts, int32_t block_size) {
    StepPlan p;
    for (const Part& s : parts) p.max_blocks_per_seq = std::max(p.max_blocks_per_seq, int32_t(s.blocks->size()));
    p.query_start = {0};
    for (const Part& s : parts) {
        for (int32_t pos = s.start; pos < s.start + s.count; ++pos) {
            p.logits_rows.push_back(p.num_tokens());
            p.token_ids.push_back((*s.tokens)[pos]);
            p.positions.push_back(pos);
            p.slot_mapping.push_back((*s.blocks)[pos / block_size] * block_size + pos % block_size);
        }
        p.query_start.push_back(p.num_tokens());
        p.context_lens.push_back(s.start + s.count);
        std::vector<int32_t> table = *s.blocks;
        table.resize(p.max_blocks_per_seq, -1);
        p.block_tables.insert(p.block_tables.end(), table.begin(), table.end());
    }
    return p;
}

// Runs the same plans on runners of both models; the error of each step's logits.
std::vector<double> compare_steps(const Model& cpu, const Model& gpu, RunnerLimits limits,
                                  const std::vector<StepPlan>& plans) {
    ModelRunner rc(cpu, limits), rg(gpu, limits);
    std::vector<double> errs;
    for (const StepPlan& p : plans) {
        rc.forward(p);
        rg.forward(p);
        errs.push_back(rel_error(rg.logits(), rc.logits()));
    }
    return errs;
}

std::vector<int32_t> shuffled_blocks(int32_t n, std::mt19937& rng) {
    std::vector<int32_t> b(n);
    std::iota(b.begin(), b.end(), 0);
    std::shuffle(b.begin(), b.end(), rng);
    return b;
}

// The largest logit's id and its margin over the second.
std::pair<int32_t, float> top2(const float* x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    float second = -INFINITY;
    for (int32_t i = 0; i < n; ++i)
        if (i != best) second = std::max(second, x[i]);
    return {best, x[best] - second};
}

int synthetic_mode(const std::string& spec, double threshold, KVDType kv_dtype) {
    std::printf("minfer_gpu_model: %s\n  synthetic %s\n", cuda_device_summary().c_str(), spec.c_str());
    auto cpu = make_cpu_backend();
    auto gpu = make_cuda_backend();
    // A .gguf path (e.g. written by `minfer synth` once, as quantizing 8B weights takes minutes) or a spec.
    const bool is_file = spec.size() > 5 && spec.ends_with(".gguf");
    auto model_c = is_file ? Model::load(spec, *cpu) : Model::load(open_model_source("", spec), *cpu);
    auto model_g = is_file ? Model::load(spec, *gpu) : Model::load(open_model_source("", spec), *gpu);
    const int32_t vocab = model_c->config().vocab_size, prompt = 24, steps = 6, bs = 16;
    const int32_t blocks = (prompt + steps + bs - 1) / bs + 1;
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    std::vector<int32_t> tokens(prompt);
    for (int32_t& t : tokens) t = token(rng);
    const std::vector<int32_t> table = shuffled_blocks(blocks, rng);
    // Both sides read the same kind of KV pool (a bf16 pool rounds on both).
    const RunnerLimits limits{prompt, 1, blocks, bs, prompt, false, kv_dtype};
    ModelRunner rc(*model_c, limits), rg(*model_g, limits);
    Tally tally;
    int32_t clear = 0, agree = 0;
    for (int32_t step = 0; step <= steps; ++step) {
        const int32_t start = step == 0 ? 0 : prompt + step - 1, count = step == 0 ? prompt : 1;
        StepPlan plan = batch_plan({{&tokens, &table, start, count}}, bs);
        if (step == 0) plan.logits_rows = {count - 1};  // only the last prompt row, as the engine asks
        rc.forward(plan);
        rg.forward(plan);
        const std::vector<float> lc = rc.logits(), lg = rg.logits();
        const double err = rel_error(lg, lc);
        double diff2 = 0;
        for (size_t i = 0; i < lc.size(); ++i) diff2 += (double(lg[i]) - lc[i]) * (double(lg[i]) - lc[i]);
        const double rms_diff = std::sqrt(diff2 / double(lc.size()));
        const auto [id_c, margin] = top2(lc.data(), vocab);
        const int32_t id_g = top2(lg.data(), vocab).first;
        // A margin of 8 RMS errors cannot be crossed by an error of that size but in a freak row.
        const bool is_clear = margin > 8 * rms_diff;
        clear += is_clear;
        agree += is_clear && id_c == id_g;
        char shape[160], note[160];
        std::snprintf(shape, sizeof shape, "%s %s (pos %d)", spec.c_str(), step == 0 ? "prefill 24" : "decode",
                      start + count - 1);
        std::snprintf(note, sizeof note, "  greedy cpu %d gpu %d, margin %.3g vs rms error %.3g%s", id_c, id_g,
                      margin, rms_diff, is_clear ? "" : " (near tie)");
        tally.line("logits", shape, err, threshold, note);
        if (is_clear && id_c != id_g) tally.line("greedy", shape, 1, 0, "  tokens differ with a clear margin");
        tokens.push_back(id_c);
    }
    std::printf("greedy: %d of %d steps with a clear margin agree\n", agree, clear);
    std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
    return tally.failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path = MINFER_SOURCE_DIR "/models/stories260K.gguf";
    std::string reference = MINFER_SHARED_DIR "/reference/stories260K/run_c_greedy.json";
    std::string synthetic;
    double threshold = 5e-2;
    KVDType kv_dtype = KVDType::F32;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--model" && i + 1 < argc) {
            model_path = argv[++i];
        } else if (a == "--reference" && i + 1 < argc) {
            reference = argv[++i];
        } else if (a == "--synthetic" && i + 1 < argc) {
            synthetic = argv[++i];
        } else if (a == "--threshold" && i + 1 < argc) {
            threshold = std::stod(argv[++i]);
        } else if (a == "--kv-cache-dtype" && i + 1 < argc) {
            const std::string d = argv[++i];
            if (d != "float32" && d != "bfloat16") {
                std::fprintf(stderr, "--kv-cache-dtype must be float32 or bfloat16\n");
                return 2;
            }
            kv_dtype = d == "bfloat16" ? KVDType::BF16 : KVDType::F32;
        } else {
            std::fprintf(stderr,
                         "usage: %s [--model PATH] [--reference PATH] | --synthetic PRESET:DTYPE [--threshold REL] "
                         "[--kv-cache-dtype float32|bfloat16]\n",
                         argv[0]);
            return 2;
        }
    }
    if (!minfer::gpu_test::cuda_device_answers("minfer_gpu_model")) return minfer::gpu_test::kSkipNoGpu;
    try {
        if (!synthetic.empty()) return synthetic_mode(synthetic, threshold, kv_dtype);
        std::printf("minfer_gpu_model: %s\n  model %s\n  reference %s\n", cuda_device_summary().c_str(),
                    model_path.c_str(), reference.c_str());
        const std::vector<Case> cases = read_cases(reference);
        auto cpu = make_cpu_backend();
        auto gpu = make_cuda_backend();
        auto model_c = Model::load(model_path, *cpu);
        auto model_g = Model::load(model_path, *gpu);
        const std::vector<int32_t> stop_ids = default_stop_ids(*Tokenizer::from_gguf(model_c->file()));
        Tally tally;

        // Whole prompt in one step, chunked prefill, and block sizes 1 to 32.
        const std::pair<int32_t, int32_t> configs[] = {{512, 16}, {3, 32}, {64, 1}};
        for (auto [batch, block] : configs)
            for (const Case& c : cases) {
                const auto ids_g = generate_greedy(*model_g, c, batch, block, stop_ids);
                const auto ids_c = generate_greedy(*model_c, c, batch, block, stop_ids);
                const int32_t vs_ref = mismatches(ids_g, c.generated_ids), vs_cpu = mismatches(ids_g, ids_c);
                char shape[128];
                std::snprintf(shape, sizeof shape, "\"%s\" steps=%d batch=%d block=%d (%zu ids)", c.prompt.c_str(),
                              c.steps, batch, block, ids_g.size());
                char note[96];
                std::snprintf(note, sizeof note, "  (mismatches: %d vs reference, %d vs cpu)", vs_ref, vs_cpu);
                tally.line("generate", shape, std::max(vs_ref, vs_cpu), 0, vs_ref || vs_cpu ? note : "");
            }

        std::mt19937 rng(7);
        const int32_t vocab = model_c->config().vocab_size;
        std::uniform_int_distribution<int32_t> token(0, vocab - 1);
        auto random_tokens = [&](int32_t n) {
            std::vector<int32_t> t(n);
            for (int32_t& x : t) x = token(rng);
            return t;
        };

        {  // One long prefill: BOS and the first reference generation, logits of every row.
            std::vector<int32_t> tokens = cases.at(0).prompt_ids;
            tokens.insert(tokens.end(), cases[0].generated_ids.begin(), cases[0].generated_ids.end());
            tokens.resize(std::min<size_t>(tokens.size(), 200));
            const int32_t n = int32_t(tokens.size()), bs = 16, blocks = (n + bs - 1) / bs + 4;
            const std::vector<int32_t> table = shuffled_blocks(blocks, rng);
            const StepPlan plan = batch_plan({{&tokens, &table, 0, n}}, bs);
            const double err = compare_steps(*model_c, *model_g, {n, n, blocks, bs}, {plan})[0];
            tally.line("logits", "prefill " + std::to_string(n) + " rows, block 16, every row", err, kLogitsThreshold);
        }

        {  // Several sequences in one step, then prefill chunks next to decodes and a new sequence.
            const int32_t bs = 4, blocks = 40;
            const std::vector<int32_t> a = random_tokens(41), b = random_tokens(35), c = random_tokens(7);
            const std::vector<int32_t> pool = shuffled_blocks(blocks, rng);
            const std::vector<int32_t> ta(pool.begin(), pool.begin() + 11), tb(pool.begin() + 11, pool.begin() + 20),
                tc(pool.begin() + 20, pool.begin() + 22);
            const std::vector<StepPlan> plans = {
                batch_plan({{&a, &ta, 0, 40}, {&b, &tb, 0, 25}}, bs),
                batch_plan({{&a, &ta, 40, 1}, {&b, &tb, 25, 10}, {&c, &tc, 0, 7}}, bs),
            };
            for (const StepPlan& p : plans) p.validate(blocks, bs);
            const auto errs = compare_steps(*model_c, *model_g, {128, 128, blocks, bs}, plans);
            tally.line("logits", "batch step 1: prefill 40 + prefill 25, block 4", errs[0], kLogitsThreshold);
            tally.line("logits", "batch step 2: decode + chunk of 10 + new 7, block 4", errs[1], kLogitsThreshold);
        }

        std::printf("%d passed, %d failed\n", tally.passed, tally.failed);
        return tally.failed ? 1 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "minfer_gpu_model: %s\n", e.what());
        return 2;
    }
}
