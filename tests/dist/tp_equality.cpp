// Tensor and expert parallelism against one process, under `mpirun -np N`
// (ctest runs N = 2 and 4 on the CPU). Every rank loads its shard of each model; rank 0
// also loads the whole model on its own, runs the same steps on both (a mixed
// step of two prefills, then greedy decodes of both sequences) and checks that
// the logits agree within 1e-5 relative and the greedy tokens are equal.
// The other ranks serve rank 0's steps. Exit code 1 when a check fails.
#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../rel_error.h"
#include "dist/communicator.h"
#include "dist/mpi_control.h"
#include "dist/mpi_session.h"
#include "engine/core/plan_builder.h"
#include "engine/gguf/synth.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "kvcache/block_manager.h"

using namespace minfer;

namespace {

// Float weights: the sums differ only in order (each rank adds its part of a
// row-parallel product, then the all-reduce adds the parts).
constexpr double kTolerance = 1e-5;
// Quantized weights multiply activations quantized to 8 bits (Q8_0 blocks of
// 32, Q8_K of 256) as llama.cpp does: an activation that differs by an ulp
// can round to the next step, 1/127 of its block's largest, and the error
// grows from there (one seed of the Q8_0 llama shows 7e-3, most 2e-7). The
// greedy tokens must still be equal.
constexpr double kQuantizedTolerance = 2e-2;

struct Case {
    std::string name;
    std::function<GGUFFile()> open;
    double tolerance = kTolerance;
    bool expert_parallel = false;  // a mixture of experts, its experts split by id
};

GGUFFile synthetic(const SynthPreset& p, SynthDType dtype) {
    return GGUFFile::from_bytes(synth_image(p, dtype, {.seed = 11}), std::string(p.name) + ":" + synth_dtype_name(dtype));
}
GGUFFile synthetic(const char* preset, SynthDType dtype) { return synthetic(*find_synth_preset(preset), dtype); }

// Shapes that split over 2 and 4 ranks at the quant types' block boundaries
// (Q4_K's 256 needs 512 query features and 1024 FFN features over 2).
const SynthPreset kLlama = {"tp-llama", "llama", "test", 256, 2, 8, 4, 512, 320, 128, false, false, 10000.0f, 1e-5f};
const SynthPreset kLlamaWide = {"tp-llama-wide", "llama", "test", 512, 2, 8, 2, 1024, 320, 128,
                                false, false, 10000.0f, 1e-5f};
// Llama 3.1 rope scaling (rope_freqs); 301 tokens split unevenly (150 + 151, 75 x 3 + 76).
const SynthPreset kLlama3 = {"tp-llama3", "llama", "test", 128, 2, 8, 2, 256, 301, 128, false, false,
                             500000.0f, 1e-5f, 32.0f, 1.0f, 4.0f, 8192};
// qwen2: q/k/v biases sharded with their rows, the LM head tied to the embedding.
const SynthPreset kQwen2 = {"tp-qwen2", "qwen2", "test", 128, 2, 4, 2, 256, 320, 128, true, true, 1000000.0f, 1e-6f};
// qwen3: q/k norms; head size 32 wider than dim / heads.
const SynthPreset kQwen3 = {"tp-qwen3", "qwen3", "test", 96, 2, 4, 2, 192, 320, 128, true, false,
                            1000000.0f, 1e-6f, 0.0f, 0.0f, 0.0f, 0, 32};
// gemma3: one KV head for every rank (replicated), GELU, post norms, sliding layers.
const SynthPreset kGemma3 = {"tp-gemma3", "gemma3", "test", 64, 7, 4, 1, 128, 320, 128, true, false,
                             1000000.0f, 1e-6f, 0.0f, 0.0f, 0.0f, 0, 48, 4};

struct Sequence {
    SequenceState state;
    int32_t next = 0;  // the greedy token to feed next
};

int32_t argmax(const float* row, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (row[i] > row[best]) best = i;
    return best;
}

// Runs the steps on `runner`; returns every step's logits and the greedy tokens.
struct Trace {
    std::vector<std::vector<float>> logits;
    std::vector<int32_t> tokens;
};

Trace run_steps(ModelRunner& runner, int32_t vocab) {
    const int32_t block_size = 4, blocks = 32;
    BlockManager manager(blocks, block_size, false);
    std::vector<Sequence> seqs(2);
    seqs[0].state.tokens = {1, 17, 42, 99, 7, 150, 3, 260, 88};
    seqs[1].state.tokens = {1, 5, 230, 64, 12};
    Trace trace;
    PlanBuilder planner(block_size);
    for (int step = 0; step < 5; ++step) {
        for (Sequence& s : seqs) {
            const int32_t total = int32_t(s.state.tokens.size());
            std::vector<BlockCopy> copies;
            if (!manager.allocate(s.state.blocks, s.state.num_computed, total, copies))
                throw std::runtime_error("the test's KV pool is too small");
            const int32_t first = planner.add_rows(s.state, total - s.state.num_computed);
            planner.add_logits_row(first + total - s.state.num_computed - 1);
        }
        runner.forward(planner.finish());
        const std::vector<float> l = runner.logits();
        trace.logits.push_back(l);
        for (size_t i = 0; i < seqs.size(); ++i) {
            Sequence& s = seqs[i];
            s.state.num_computed = int32_t(s.state.tokens.size());
            const int32_t t = argmax(l.data() + i * size_t(vocab), vocab);
            trace.tokens.push_back(t);
            s.state.tokens.push_back(t);
        }
    }
    return trace;
}

}  // namespace

int main() {
    MpiSession mpi;
    const World& world = mpi.world();
    const auto control = make_mpi_control(world);
    auto backend = make_cpu_backend(cpu_threads_for(world, 0));
    auto comm = make_communicator(*backend, *control);
    const Group tensor_parallel{*control, *comm}, expert_parallel{*control, *comm, true};

    std::vector<Case> cases = {
        {"stories260K (f32)", [] { return GGUFFile::open(MINFER_SOURCE_DIR "/models/stories260K.gguf"); }},
        {"llama q8_0", [] { return synthetic(kLlama, SynthDType::Q8_0); }, kQuantizedTolerance},
        {"llama f16", [] { return synthetic(kLlama, SynthDType::F16); }},
        {"llama3 (rope scaling, odd vocabulary) f32", [] { return synthetic(kLlama3, SynthDType::F32); }},
        {"qwen2 (biases, tied) f32", [] { return synthetic(kQwen2, SynthDType::F32); }},
        {"qwen3 (q/k norms) f32", [] { return synthetic(kQwen3, SynthDType::F32); }},
        {"gemma3 (one KV head for all ranks) f32", [] { return synthetic(kGemma3, SynthDType::F32); }},
        // Expert parallelism: 8 experts, 2 a token, 4 or 2 a rank; attention tensor-parallel.
        {"qwen3moe-tiny EP f32", [] { return synthetic("qwen3moe-tiny", SynthDType::F32); }, kTolerance, true},
        {"qwen2moe-tiny EP (shared expert split) f32", [] { return synthetic("qwen2moe-tiny", SynthDType::F32); },
         kTolerance, true},
        {"mixtral-tiny EP f32", [] { return synthetic("mixtral-tiny", SynthDType::F32); }, kTolerance, true},
        {"qwen3moe-tiny EP q8_0", [] { return synthetic("qwen3moe-tiny", SynthDType::Q8_0); }, kQuantizedTolerance,
         true},
    };
    if (world.size == 2)
        cases.push_back({"llama q4_k_m", [] { return synthetic(kLlamaWide, SynthDType::Q4_K_M); }, kQuantizedTolerance});

    int failures = 0;
    for (const Case& c : cases) {
        const Group& group = c.expert_parallel ? expert_parallel : tensor_parallel;
        const auto model = Model::load(c.open(), *backend, &group);
        if (!group.is_root()) {
            ModelRunner::serve_workers(*model);
            continue;
        }
        const RunnerLimits limits{64, 4, 32, 4};
        Trace split, whole;
        const size_t reduced_before = comm->floats_reduced();
        std::string balance;
        {
            ModelRunner runner(*model, limits);
            split = run_steps(runner, model->config().vocab_size);
            const ParallelStats st = runner.parallel_stats();
            for (const int64_t pairs : st.expert_pairs) balance += fmt::format(" {}", pairs);
            if (!balance.empty())
                balance = fmt::format("; expert pairs by rank{}, worst step {:.2f} x the mean", balance, st.imbalance_max);
        }
        const double floats_a_step = double(comm->floats_reduced() - reduced_before) / double(split.logits.size());
        ModelRunner::release_workers(group);
        const auto alone = Model::load(c.open(), *backend);
        {
            ModelRunner runner(*alone, limits);
            whole = run_steps(runner, alone->config().vocab_size);
        }
        double worst = 0;
        for (size_t s = 0; s < whole.logits.size(); ++s)
            worst = std::max(worst, test::rel_error(split.logits[s], whole.logits[s]));
        const bool ok = worst <= c.tolerance && split.tokens == whole.tokens;
        failures += !ok;
        std::printf("%s  tp=%d  %-44s logits rel. error %.2e (limit %.0e), greedy tokens %s; all-reduce %.0f floats a step%s\n",
                    ok ? "ok  " : "FAIL", world.size, c.name.c_str(), worst, c.tolerance,
                    split.tokens == whole.tokens ? "equal" : "DIFFER", floats_a_step, balance.c_str());
    }
    if (world.rank == 0) std::printf("%d of %zu cases failed\n", failures, cases.size());
    return failures ? 1 : 0;
}
