// What the synthetic-model tests share: presets by name, temp paths, the
// small presets that run in a unit test, and the relative error of logits.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../rel_error.h"
#include "engine/core/plan_builder.h"
#include "engine/gguf/synth.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "kvcache/block_manager.h"

namespace minfer::synth_test {

inline const SynthPreset& preset(const char* name) {
    const SynthPreset* p = find_synth_preset(name);
    REQUIRE_MESSAGE(p != nullptr, name);
    return *p;
}

inline std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / name).string();
}

// Small presets that run in a unit test: a llama with Llama 3.1 rope scaling
// and a qwen2 (NEOX rope, q/k/v biases, tied). dim 160 is not a multiple of
// 256, so Q4_K_M falls back as it does for Qwen2.5 0.5B.
inline const SynthPreset kSmallLlama3 = {"test-llama3", "llama", "test", 128, 2, 8, 2, 256, 300, 128, false, false,
                                         500000.0f, 1e-5f, 32.0f, 1.0f, 4.0f, 8192};
inline const SynthPreset kSmallQwen2 = {"test-qwen2", "qwen2", "test", 160, 2, 5, 1, 256, 320, 128, true, true,
                                        1000000.0f, 1e-6f};
// A qwen3: q/k norms, NEOX rope, head size 32 wider than dim / heads.
inline const SynthPreset kSmallQwen3 = {"test-qwen3", "qwen3", "test", 96, 2, 4, 2, 192, 320, 128, true, false,
                                        1000000.0f, 1e-6f, 0.0f, 0.0f, 0.0f, 0, 32};
// A gemma3 of 7 layers (layer 5 global, the others sliding over 4 tokens, so
// the 9-token test sees windows bite), head size 48 over 2 query heads.
inline const SynthPreset kSmallGemma3 = {"test-gemma3", "gemma3", "test", 64, 7, 2, 1, 128, 320, 128, true, false,
                                         1000000.0f, 1e-6f, 0.0f, 0.0f, 0.0f, 0, 48, 4};

// Every row's logits from one prefill of `tokens`.
inline std::vector<std::vector<float>> prefill_logits(const Model& model, const std::vector<int32_t>& tokens) {
    const int32_t n = static_cast<int32_t>(tokens.size()), block_size = 4, blocks = n / block_size + 2;
    BlockManager manager(blocks, block_size, false);
    ModelRunner runner(model, {n, n, blocks, block_size});
    SequenceState seq;
    seq.tokens = tokens;
    std::vector<BlockCopy> copies;
    REQUIRE(manager.allocate(seq.blocks, 0, n, copies));
    PlanBuilder planner(block_size);
    planner.add_rows(seq, n);
    for (int32_t r = 0; r < n; ++r) planner.add_logits_row(r);
    runner.forward(planner.finish());
    const std::vector<float> l = runner.logits();
    const size_t vocab = static_cast<size_t>(model.config().vocab_size);
    std::vector<std::vector<float>> out;
    for (size_t r = 0; r < tokens.size(); ++r) out.emplace_back(l.begin() + r * vocab, l.begin() + (r + 1) * vocab);
    return out;
}

inline double relative_rms(const std::vector<float>& got, const std::vector<float>& want) {
    return minfer::test::rel_error(got, want);
}

}  // namespace minfer::synth_test
