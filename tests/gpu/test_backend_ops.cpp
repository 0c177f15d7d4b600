// minfer_gpu_ops: every op of the CUDA backend against the CPU reference, in
// the spirit of llama.cpp's test-backend-ops. One file on purpose, like
// test-backend-ops: every op's cases and tolerances side by side.
//
// Each case draws fresh random inputs (never zeros), poisons the outputs with
// NaN on both backends, runs the op on both and prints
//     op  shape  ||gpu - cpu|| / ||cpu||  threshold  PASS/FAIL
// then "N passed, M failed" alone on a line. The exit code is 1 if any case
// failed, 2 if the run itself could not start.
//
// Usage: minfer_gpu_ops [--filter SUBSTRING] [--seed N] [--bench | --bench-attention | --bench-matmul | --bench-gemv]
//
// --bench instead times paged attention (decode GB/s of K/V, prefill TFLOP/s)
// and the quantized matmul on Llama-3-8B's shapes: the GEMV (1 and 8 rows) in
// GB/s of weights, the tensor-core GEMM (64 rows) in GB/s and TFLOP/s, a
// 512-row prefill (bf16 widening + GEMM) in TFLOP/s, and the widening alone
// (both versions) in GB/s moved. --bench-attention and --bench-matmul time one
// of the two (with MINFER_DECODE_MMA=0 or MINFER_QUANT_MMA=0, the other kernel).
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "kernels/formats/float16.h"
#include "kernels/formats/quant.h"
#include "kernels/cuda/cuda_backend.h"
#include "gpu_skip.h"
#include "kernels/cuda/cuda_ops.h"
#include "fp8_host.h"
#include "sample_drafts.h"
#include "../rel_error.h"

using namespace minfer;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Thresholds by precision.
constexpr double kF32 = 1e-5;       // fp32 on both sides, different summation orders
constexpr double kF32Gemm = 2e-5;   // fp32 dot products up to 4096 long
constexpr double kF16Gemm = 5e-3;   // activations rounded to fp16 (11-bit mantissa)
constexpr double kBF16Gemm = 1e-2;  // activations rounded to bf16 (8-bit mantissa)
constexpr double kQ8Gemm = 2e-2;    // the CPU twin quantizes activations to int8 per block (llama.cpp's way)
// Both sides quantize activations to int8, each its own way: the CPU per 256 for
// the K types, the GPU's int8 GEMV per 32. Two independent roundings of ~1.5e-2
// each on short rows (k = 256-768, few outputs); measured up to 3.1e-2.
constexpr double kQ8Both = 4e-2;
constexpr double kQ8Ffn = 4e-2;     // two such matmuls in series (an expert's up, then down): K-quants reach 1.9e-2
// --quantization fp8, against a host model of the same rounding (fp8_host.h):
constexpr double kFp8Gemv = 3e-5;   // fp32 FMAs on exact e4m3 weights: only the summation order differs
constexpr double kFp8Gemm = 5e-4;   // Hopper's FP8 tensor cores keep ~14-bit partial sums between fp32 promotions
constexpr double kFp8Real = 6e-2;   // against the unquantized f32 product: e4m3's 3-bit mantissa (~3% per operand)
// Attention: 3xTF32 products on the tensor cores (~2^-21 relative each) and
// fp32 online softmax; the CPU sums scores and outputs sequentially in fp32.
constexpr double kAttn = 2e-5;
constexpr double kAttnLong = 5e-5;
// RoPE into a bf16 pool: the GPU's sincosf differs from the CPU's by an ulp or so,
// which now and then moves a rotated key to the neighbouring bf16 (2^-8 relative).
constexpr double kBf16Pool = 1e-3;
// Attention on bf16 tensor cores: P rounded to bf16, and prefill's Q (2^-9 relative
// each; decode_bf16_kernel keeps Q as hi + lo).
constexpr double kAttnBf16 = 1e-2;  // 16K-32K keys: the CPU's sequential fp32 sums drift ~eps*sqrt(n)

// The quantized types the CUDA backend keeps quantized.
const GGMLType kQuantTypes[] = {GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,
                                GGMLType::Q5_1, GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K};
int64_t block_elems(GGMLType t) { return ggml_type_traits(uint32_t(t))->block_elems; }

// The threshold of a quantized matmul of `rows` rows of k: kQ8Both where the GPU
// takes the int8 GEMV (Q4_K, Q6_K, and Q8_0 rows of whole runs of 8 blocks, up to
// 8 rows), kQ8Gemm where its activations stay fp32 or bf16.
double quant_threshold(GGMLType type, int32_t rows, int32_t k) {
    const bool int8 = type == GGMLType::Q4_K || type == GGMLType::Q6_K || (type == GGMLType::Q8_0 && k % 256 == 0);
    return int8 && rows <= cuda::kQuantGemvMaxRows ? kQ8Both : kQ8Gemm;
}

using minfer::test::rel_error;  // NaN in out gives NaN: a failure

// Device copies of host vectors, freed when the case ends.
class DeviceArena {
public:
    explicit DeviceArena(Backend& b) : b_(b) {}
    ~DeviceArena() {
        for (void* p : ptrs_) b_.free(p);
    }
    DeviceArena(const DeviceArena&) = delete;
    DeviceArena& operator=(const DeviceArena&) = delete;

    template <class T>
    T* copy(const std::vector<T>& v) {
        void* p = b_.alloc(std::max<size_t>(v.size(), 1) * sizeof(T));
        ptrs_.push_back(p);
        if (!v.empty()) b_.upload(p, v.data(), v.size() * sizeof(T));
        return static_cast<T*>(p);
    }
    float* poisoned(size_t n) { return copy(std::vector<float>(n, kNaN)); }
    template <class T>
    std::vector<T> fetch(const T* p, size_t n) {
        std::vector<T> v(n);
        if (n) b_.download(v.data(), p, n * sizeof(T));
        return v;
    }

private:
    Backend& b_;
    std::vector<void*> ptrs_;
};

// A step of several sequences: sequence s has query_len new rows at the end of
// context_len tokens.
struct Seq {
    int32_t query_len;
    int32_t context_len;
};

int32_t blocks_needed(const std::vector<Seq>& seqs, int32_t block_size) {
    int32_t n = 0;
    for (const Seq& s : seqs) n += (s.context_len + block_size - 1) / block_size;
    return n;
}

// Blocks are drawn in random order from a pool of num_blocks, so every block
// table is scattered; logits are wanted for each sequence's last row.
StepPlan make_plan(std::mt19937& rng, const std::vector<Seq>& seqs, int32_t block_size, int32_t num_blocks,
                   int32_t vocab) {
    std::vector<int32_t> pool(num_blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    StepPlan p;
    for (const Seq& s : seqs) p.max_blocks_per_seq = std::max(p.max_blocks_per_seq, (s.context_len + block_size - 1) / block_size);
    p.query_start = {0};
    size_t next = 0;
    for (const Seq& s : seqs) {
        std::vector<int32_t> table(p.max_blocks_per_seq, -1);
        for (int32_t b = 0; b < (s.context_len + block_size - 1) / block_size; ++b) table[b] = pool.at(next++);
        p.block_tables.insert(p.block_tables.end(), table.begin(), table.end());
        for (int32_t pos = s.context_len - s.query_len; pos < s.context_len; ++pos) {
            p.token_ids.push_back(token(rng));
            p.positions.push_back(pos);
            p.slot_mapping.push_back(table[pos / block_size] * block_size + pos % block_size);
        }
        p.query_start.push_back(p.num_tokens());
        p.context_lens.push_back(s.context_len);
        p.logits_rows.push_back(p.num_tokens() - 1);
    }
    p.validate(num_blocks, block_size);
    return p;
}

// The step shapes the attention-side ops are tried on.
struct PlanKind {
    const char* name;
    std::vector<Seq> seqs;
};
const std::vector<PlanKind> kPlanKinds = {
    {"decode", {{1, 1}, {1, 17}, {1, 33}, {1, 300}}},
    {"prefill", {{45, 45}}},
    {"mixed", {{20, 70}, {1, 5}, {4, 129}, {1, 700}}},  // a prefill chunk on a context, decodes, a verification
};

std::string seqs_text(const std::vector<Seq>& seqs) {
    std::string s;
    for (const Seq& q : seqs) s += (s.empty() ? "" : ",") + std::to_string(q.query_len) + "/" + std::to_string(q.context_len);
    return s;
}

std::vector<uint8_t> encode(const std::vector<float>& v, GGMLType type) {
    if (is_quantized(type)) {  // our reference quantizer (A2), whole array as one row
        std::vector<uint8_t> bytes(ggml_row_bytes(type, int64_t(v.size())));
        quantize_row(type, v.data(), bytes.data(), int64_t(v.size()));
        return bytes;
    }
    std::vector<uint8_t> bytes(v.size() * (type == GGMLType::F32 ? 4 : 2));
    for (size_t i = 0; i < v.size(); ++i) {
        if (type == GGMLType::F32) {
            std::memcpy(&bytes[4 * i], &v[i], 4);
        } else {
            const uint16_t h = type == GGMLType::F16 ? f32_to_fp16(v[i]) : f32_to_bf16(v[i]);
            std::memcpy(&bytes[2 * i], &h, 2);
        }
    }
    return bytes;
}

class OpTests {
public:
    OpTests(Backend& cpu, Backend& gpu, std::string filter, uint32_t seed)
        : cpu_(cpu), gpu_(gpu), filter_(std::move(filter)), rng_(seed) {}

    int passed = 0;
    int failed = 0;

    void embedding() {
        const GGMLType types[] = {GGMLType::F32, GGMLType::F16, GGMLType::BF16};
        const std::pair<int32_t, int32_t> shapes[] = {{37, 7}, {512, 64}, {1000, 129}, {50, 4096}};  // vocab, dim
        const int32_t rows[] = {1, 13, 100};
        int i = 0;
        for (GGMLType type : types)
            for (auto [vocab, dim] : shapes) embedding_case(type, vocab, dim, rows[i++ % 3]);
        // Quantized tables: whole blocks per row (B weights), odd vocabularies.
        for (GGMLType type : kQuantTypes) {
            const int32_t b = int32_t(block_elems(type));
            const std::pair<int32_t, int32_t> qshapes[] = {{37, b}, {1001, 5 * b}, {51, 4096}};
            for (auto [vocab, dim] : qshapes) embedding_case(type, vocab, dim, rows[i++ % 3]);
        }
        // A vocabulary-parallel shard: rank 1 of 3's rows; the other ids give zeros.
        for (GGMLType type : {GGMLType::BF16, GGMLType::F32, GGMLType::Q8_0, GGMLType::Q4_K, GGMLType::Q6_K})
            embedding_case(type, 1000, int32_t(std::max<int64_t>(block_elems(type), 64)), 100, {1, 3});
    }

    void embedding_case(GGMLType type, int32_t vocab, int32_t dim, int32_t n, std::pair<int, int> shard = {0, 1}) {
        const std::string name = fmt("%s vocab=%d dim=%d rows=%d", ggml_type_name(type), vocab, dim, n) +
                                 (shard.second > 1 ? fmt(" shard %d of %d", shard.first, shard.second) : "");
        run("embedding", name, kF32, [&] {
            const auto bytes = encode(randn(size_t(vocab) * dim), type);
            const int64_t first = int64_t(vocab) * shard.first / shard.second;
            const int64_t held = int64_t(vocab) * (shard.first + 1) / shard.second - first;
            const WeightView view{"table", type, held, dim, bytes.data() + size_t(first) * ggml_row_bytes(type, dim)};
            auto wc = cpu_.pack_weight(view);
            auto wg = gpu_.pack_weight(view);
            const StepPlan plan = make_plan(rng_, {{n, n}}, 16, (n + 15) / 16, vocab);
            set_step(plan, 16);
            DeviceArena g(gpu_);
            std::vector<float> ref(size_t(n) * dim, kNaN);
            float* out = g.poisoned(ref.size());
            cpu_.embedding(*wc, first, ref.data());
            gpu_.embedding(*wg, first, out);
            return rel_error(g.fetch(out, ref.size()), ref);
        });
    }

    void add_rms_norm() {
        const std::pair<int32_t, int32_t> shapes[] = {{1, 1}, {1, 64}, {7, 33}, {5, 4096}, {64, 100}, {3, 5120}, {2, 12345}};
        for (auto [rows, dim] : shapes)
            for (bool with_delta : {false, true})
                run("add_rms_norm", fmt("rows=%d dim=%d %s", rows, dim, with_delta ? "+delta" : ""), kF32, [&] {
                    const size_t n = size_t(rows) * dim;
                    std::vector<float> residual = randn(n), delta = randn(n), weight = randn(dim);
                    DeviceArena g(gpu_);
                    float* res_g = g.copy(residual);
                    float* out_g = g.poisoned(n);
                    std::vector<float> out(n, kNaN);
                    cpu_.add_rms_norm(residual.data(), with_delta ? delta.data() : nullptr, weight.data(), 1e-5f, rows,
                                      dim, out.data());
                    gpu_.add_rms_norm(res_g, with_delta ? g.copy(delta) : nullptr, g.copy(weight), 1e-5f, rows, dim, out_g);
                    return std::max(rel_error(g.fetch(out_g, n), out), rel_error(g.fetch(res_g, n), residual));
                });
    }

    void rope_kv_write() {
        const int32_t head_dims[] = {8, 64, 128, 256};
        const std::pair<int32_t, int32_t> heads[] = {{4, 4}, {8, 4}, {8, 2}, {16, 2}};
        const int32_t block_sizes[] = {1, 16, 32};
        int i = 0;
        for (int32_t hd : head_dims)
            for (bool neox : {false, true})
                for (const PlanKind& kind : kPlanKinds) {
                    const auto [nh, nkv] = heads[i % 4];
                    const int32_t bs = block_sizes[i % 3];
                    const int32_t n_rot = i % 2 ? hd : hd / 2;
                    const bool factors = i % 3 == 1;
                    const float pscale = i % 4 == 3 ? 0.25f : 1.0f;
                    const float base = i % 2 ? 500000.0f : 10000.0f;
                    ++i;
                    const std::string shape =
                        fmt("%s hd=%d rot=%d heads=%d/%d bs=%d%s%s %s(%s)", neox ? "NEOX" : "NORM", hd, n_rot, nh, nkv,
                            bs, factors ? " freq_factors" : "", pscale != 1.0f ? " scale=0.25" : "", kind.name,
                            seqs_text(kind.seqs).c_str());
                    for (KVDType dtype : {KVDType::F32, KVDType::BF16})
                    run("rope_kv_write", shape + (dtype == KVDType::BF16 ? " bf16 pool" : ""),
                        dtype == KVDType::BF16 ? kBf16Pool : kF32, [&] {
                        const int32_t num_blocks = blocks_needed(kind.seqs, bs) + 3;
                        const StepPlan plan = make_plan(rng_, kind.seqs, bs, num_blocks, 1000);
                        set_step(plan, bs);
                        const int32_t n = plan.num_tokens();
                        const AttentionParams attn{nh, nkv, hd, 1.0f / std::sqrt(float(hd)), 0};
                        std::vector<float> q = randn(size_t(n) * nh * hd), k = randn(size_t(n) * nkv * hd),
                                           v = randn(size_t(n) * nkv * hd), ff = randu(n_rot / 2, 1.0f, 8.0f);
                        const KVCacheShape cs{2, num_blocks, bs, nkv, hd, dtype};
                        const size_t pool = cs.elems_per_block() * num_blocks;
                        // Float pools, or bf16 ones as pairs of bf16 in each float's bytes.
                        const size_t words = dtype == KVDType::BF16 ? (pool + 1) / 2 : pool;
                        std::vector<std::vector<float>> pools(4);
                        for (auto& p : pools) {
                            if (dtype == KVDType::F32) {
                                p = randn(words);
                                continue;
                            }
                            p.resize(words);
                            for (float& w : p) {  // each half a bf16 of a normal value
                                const uint32_t lo = f32_to_bf16(normal_(rng_)), hi = f32_to_bf16(normal_(rng_));
                                w = std::bit_cast<float>(hi << 16 | lo);
                            }
                        }

                        DeviceArena g(gpu_);
                        KVCache cache_g{cs, {g.copy(pools[0]), g.copy(pools[1])}, {g.copy(pools[2]), g.copy(pools[3])}};
                        KVCache cache_c{cs, {pools[0].data(), pools[1].data()}, {pools[2].data(), pools[3].data()}};
                        float* q_g = g.copy(q);
                        RopeParams rope_c{n_rot, base, neox, pscale, factors ? ff.data() : nullptr};
                        RopeParams rope_g = rope_c;
                        rope_g.freq_factors = factors ? g.copy(ff) : nullptr;
                        cpu_.rope_kv_write(q.data(), k.data(), v.data(), attn, rope_c, cache_c, 1);
                        gpu_.rope_kv_write(q_g, g.copy(k), g.copy(v), attn, rope_g, cache_g, 1);
                        double err = rel_error(g.fetch(q_g, q.size()), q);
                        auto widened = [&](const std::vector<float>& w) {  // the pool's elements as floats
                            if (dtype == KVDType::F32) return w;
                            std::vector<float> f(pool);
                            for (size_t j = 0; j < pool; ++j) {
                                const uint32_t bits = std::bit_cast<uint32_t>(w[j / 2]);
                                f[j] = bf16_to_f32(uint16_t(j % 2 ? bits >> 16 : bits & 0xffff));
                            }
                            return f;
                        };
                        for (int p = 0; p < 4; ++p) {
                            const void* dev = p < 2 ? cache_g.k[p] : cache_g.v[p - 2];
                            const auto got = g.fetch(static_cast<const float*>(dev), words);
                            err = std::max(err, rel_error(widened(got), widened(pools[p])));
                        }
                        return err;
                    });
                }
    }

    void paged_attention() {
        const int32_t head_dims[] = {8, 64, 128, 256};
        const int32_t ratios[] = {1, 2, 4, 8};
        const int32_t block_sizes[] = {1, 16, 32};
        const int32_t windows[] = {0, 7, 50};
        int i = 0;
        for (int32_t hd : head_dims)
            for (int32_t ratio : ratios)
                for (const PlanKind& kind : kPlanKinds) {
                    const int32_t bs = block_sizes[i % 3], window = windows[(i / 3) % 3];
                    const int32_t nkv = hd == 256 ? 1 : 2, nh = nkv * ratio;
                    ++i;
                    attention_case(hd, nh, nkv, bs, window, kind.name, kind.seqs, kAttn);
                }
        // The fast kernels' shapes: head dims (72: a multiple of 8; 100: of 4
        // only, padded to 104 on the tensor cores; 66: the scalar fallback),
        // GQA ratios, block sizes (5: tiles straddle blocks), windows, and
        // steps with hundreds of rows per sequence and thousands of keys.
        const std::vector<PlanKind> kinds = {
            {"decode", {{1, 1}, {1, 700}, {1, 2100}, {1, 1500}, {1, 33}}},
            {"prefill", {{512, 512}}},
            {"mixed", {{300, 2000}, {1, 900}, {4, 1200}, {1, 50}, {1, 2500}}},
        };
        const int32_t dims2[] = {64, 80, 128, 256, 72, 100, 66};
        const int32_t ratios2[] = {1, 4, 8};
        const int32_t block_sizes2[] = {16, 32, 5};
        const int32_t windows2[] = {0, 100, 4096};
        int j = 0;
        for (int32_t hd : dims2)
            for (int32_t ratio : ratios2)
                for (const PlanKind& kind : kinds) {
                    const int32_t bs = block_sizes2[j % 3], window = windows2[(j / 3 + j) % 3];
                    ++j;
                    attention_case(hd, 2 * ratio, 2, bs, window, kind.name, kind.seqs, kAttn);
                }
        // Long contexts (fp32 sums over tens of thousands of keys on the CPU
        // side too: a looser threshold), prefills of 1000 rows, and GQA 16.
        attention_case(128, 32, 8, 16, 0, "decode", {{1, 32768}, {1, 16384}, {1, 4096}, {1, 1000}, {1, 3}}, kAttnLong);
        attention_case(128, 32, 8, 32, 4096, "decode", {{1, 32768}, {1, 5000}, {1, 4096}}, kAttnLong);
        attention_case(64, 16, 2, 16, 0, "decode", {{1, 16384}, {1, 8191}, {1, 16383}}, kAttnLong);
        attention_case(256, 8, 1, 16, 100, "decode", {{1, 16384}, {1, 101}}, kAttnLong);
        attention_case(128, 32, 8, 16, 0, "prefill", {{1000, 1000}}, kAttn);
        attention_case(80, 8, 4, 5, 100, "prefill", {{1000, 1000}}, kAttn);
        attention_case(128, 32, 2, 16, 0, "mixed", {{300, 2000}, {1, 4000}, {4, 700}, {1, 17}}, kAttn);
        attention_case(128, 32, 2, 16, 0, "decode", {{1, 3000}, {1, 1}, {1, 64}}, kAttn);
    }

    // Each case runs over a float32 pool and over a bf16 one (the same keys and
    // values rounded, given to both backends as bf16). Over a bf16 pool the
    // tensor-core kernels round P to bf16 (and prefill_bf16_kernel Q as well;
    // decode_bf16_kernel keeps Q as two bf16 parts): the CPU keeps them in fp32,
    // hence the threshold.
    void attention_case(int32_t hd, int32_t nh, int32_t nkv, int32_t bs, int32_t window, const char* kind_name,
                        const std::vector<Seq>& seqs, double threshold) {
        attention_case(hd, nh, nkv, bs, window, kind_name, seqs, threshold, KVDType::F32);
        attention_case(hd, nh, nkv, bs, window, kind_name, seqs, std::max(threshold, kAttnBf16), KVDType::BF16);
    }
    void attention_case(int32_t hd, int32_t nh, int32_t nkv, int32_t bs, int32_t window, const char* kind_name,
                        const std::vector<Seq>& seqs, double threshold, KVDType dtype) {
        const std::string shape = fmt("hd=%d heads=%d/%d bs=%d window=%d %s(%s)%s", hd, nh, nkv, bs, window, kind_name,
                                      seqs_text(seqs).c_str(), dtype == KVDType::BF16 ? " bf16 pool" : "");
        run("paged_attention", shape, threshold,
            [&] { return attention_run(hd, nh, nkv, bs, window, seqs, dtype, std::nullopt); });
    }

    // The int8 copy of the attention output that the split decode's combine
    // writes for o_proj's int8 GEMV (Q4_K, Q6_K, Q8_0 up to 8 rows; head sizes of
    // multiples of 128): decode attention -> o_proj against the CPU, with short
    // contexts (one split: the copy is quantized by a launch of its own) and long
    // ones (many splits: the combine writes it).
    void attention_int8_copy() {
        for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0})
            for (int32_t hd : {128, 256})
                for (const std::vector<Seq>& seqs : {std::vector<Seq>{{1, 3000}, {1, 700}, {1, 5}},
                                                     std::vector<Seq>{{1, 40}}}) {
                    const int32_t nh = 4096 / hd;
                    run("int8 copy",
                        fmt("%s hd=%d heads=%d/8 decode(%s): attention -> o_proj", ggml_type_name(type), hd, nh,
                            seqs_text(seqs).c_str()),
                        std::max(kAttnBf16, quant_threshold(type, int32_t(seqs.size()), nh * hd)),
                        [&] { return attention_run(hd, nh, 8, 16, 0, seqs, KVDType::BF16, type); });
                }
    }

    // Paged attention on both backends over layer 1 of random pools; with o_type,
    // then an o_proj of that type ("blk.0.attn_output.weight", 256 features) on
    // the output. The larger relative error of the two outputs.
    double attention_run(int32_t hd, int32_t nh, int32_t nkv, int32_t bs, int32_t window, const std::vector<Seq>& seqs,
                         KVDType dtype, std::optional<GGMLType> o_type) {
        const int32_t num_blocks = blocks_needed(seqs, bs) + 3;
        const StepPlan plan = make_plan(rng_, seqs, bs, num_blocks, 1000);
        set_step(plan, bs);
        const int32_t n = plan.num_tokens();
        const KVCacheShape cs{2, num_blocks, bs, nkv, hd, dtype};
        const size_t pool = cs.elems_per_block() * num_blocks, kv_row = size_t(nkv) * hd;
        // NaN everywhere but the slots of the sequences' tokens, so
        // that a read outside the block tables or past the context shows.
        std::vector<float> k(pool, kNaN), v(pool, kNaN);
        for (int32_t s = 0; s < plan.num_seqs(); ++s)
            for (int32_t t = 0; t < plan.context_lens[s]; ++t) {
                const int32_t block = plan.block_tables[size_t(s) * plan.max_blocks_per_seq + t / bs];
                const size_t slot = size_t(block) * bs + t % bs;
                for (size_t j = 0; j < kv_row; ++j) {
                    k[slot * kv_row + j] = normal_(rng_);
                    v[slot * kv_row + j] = normal_(rng_);
                }
            }
        const std::vector<float> q = randn(size_t(n) * nh * hd);
        const AttentionParams attn{nh, nkv, hd, 1.0f / std::sqrt(float(hd)), window};

        DeviceArena g(gpu_);
        // Layer 0 is NaN: only layer 1 may be read (0xffff is a bf16 NaN, and two of them a float NaN).
        void* nan_layer = g.copy(std::vector<uint16_t>(pool * 2, 0xffff));
        std::vector<uint16_t> k16, v16;
        for (size_t j = 0; j < pool; ++j) k16.push_back(f32_to_bf16(k[j])), v16.push_back(f32_to_bf16(v[j]));
        const bool b16 = dtype == KVDType::BF16;
        KVCache cache_c{cs, {nullptr, b16 ? static_cast<void*>(k16.data()) : k.data()},
                        {nullptr, b16 ? static_cast<void*>(v16.data()) : v.data()}};
        KVCache cache_g{cs, {nan_layer, b16 ? static_cast<void*>(g.copy(k16)) : g.copy(k)},
                        {nan_layer, b16 ? static_cast<void*>(g.copy(v16)) : g.copy(v)}};
        std::vector<float> ref(q.size(), kNaN);
        float* out = g.poisoned(q.size());
        std::vector<uint8_t> o_bytes;
        std::unique_ptr<PackedWeight> o_cpu, o_gpu;
        if (o_type) {  // packed first: a layer matrix taking the int8 GEMV is what turns the copies on
            o_bytes = encode(randn(size_t(256) * nh * hd, 1.0f / std::sqrt(float(nh * hd))), *o_type);
            const WeightView view{"blk.0.attn_output.weight", *o_type, 256, nh * hd, o_bytes.data()};
            o_cpu = cpu_.pack_weight(view);
            o_gpu = gpu_.pack_weight(view);
        }
        // Every upload (q's, the poisoned o_proj output's) before the attention: an
        // upload forgets the copies, and the o_proj must read the one the attention made.
        const float* q_g = g.copy(q);
        std::vector<float> o_ref(size_t(n) * 256, kNaN);
        float* o_out = o_type ? g.poisoned(o_ref.size()) : nullptr;
        cpu_.paged_attention(q.data(), attn, cache_c, 1, ref.data());
        gpu_.paged_attention(q_g, attn, cache_g, 1, out);
        if (o_type) {
            cpu_.matmul(ref.data(), *o_cpu, nullptr, n, o_ref.data());
            gpu_.matmul(out, *o_gpu, nullptr, n, o_out);
        }
        double err = rel_error(g.fetch(out, ref.size()), ref);
        if (o_type) {
            const double e = rel_error(g.fetch(o_out, o_ref.size()), o_ref);
            if (!(e <= err)) err = e;  // NaN wins
        }
        return err;
    }

    struct Shape {
        int32_t rows, k, n;
        bool offset;  // x and out one float past an aligned address
    };

    void matmul() {
        const Shape shapes[] = {{1, 64, 64, false},    {7, 33, 65, false},    {13, 100, 37, false},
                                {64, 256, 512, false}, {100, 1000, 37, false}, {1, 4096, 1000, false},
                                {3, 4096, 4096, false}, {512, 512, 512, false}, {5, 64, 64, true}, {7, 33, 65, true},
                                {8, 256, 100, false},   {9, 256, 100, true},   // the GEMVs' last row count, and one past
                                // The dense GEMV (one row): one feature; a partial stretch of 128 words; a
                                // partial last word; an unaligned row. Then cuBLASLt on the same k.
                                {1, 8, 1, false}, {1, 1000, 33, true}, {1, 2056, 17, false}, {1, 4100, 5, true},
                                {2, 1000, 33, true}, {6, 14336, 9, false},
                                // cuBLASLt's activation conversion: four columns a thread, or one
                                // where k is odd or x unaligned.
                                {20, 33, 65, false}, {24, 1000, 37, true}, {40, 4096, 64, false}};
        const GGMLType types[] = {GGMLType::F32, GGMLType::F16, GGMLType::BF16};
        int i = 0;
        for (GGMLType type : types)
            for (const Shape& s : shapes) {
                const double threshold = type == GGMLType::F32 ? kF32Gemm : type == GGMLType::F16 ? kF16Gemm : kBF16Gemm;
                matmul_case(type, s, i++ % 2 == 1, threshold);
            }
        // Quantized weights, k in whole blocks of B: the GEMV (rows 1..8) on a
        // single block, on tiles of 1024 weights with a partial last one, and
        // past 4 tiles per row (a warp's second and third tile); the tensor-core
        // GEMM (rows 9..64: 1 to 4 row tiles, a partial last stretch of k, a
        // partial last CTA of features, x not 16-byte aligned); widening + the
        // bf16 GEMM (rows > 64); odd feature counts.
        for (GGMLType type : kQuantTypes) {
            const int32_t b = int32_t(block_elems(type));
            const Shape qshapes[] = {{8, b, 1, false},     {1, 3 * b, 7, false},      {2, 1024 + b, 33, true},
                                     {3, 4096, 33, false}, {8, 4096, 7, false},       {5, 9216, 7, false},
                                     {1, 256, 4097, false}, {7, 2048 + b, 65, true},  {9, 2 * b, 33, false},
                                     {64, 1024 + b, 7, false}, {200, 4096, 33, false}, {200, b, 1, true},
                                     {17, 4096, 65, false}, {40, 2048 + b, 100, false}, {64, 4096, 128, false},
                                     {33, 1024 + b, 70, true}};
            for (const Shape& s : qshapes) matmul_case(type, s, i++ % 2 == 1, quant_threshold(type, s.rows, s.k));
        }
    }

    void matmul_case(GGMLType type, const Shape& s, bool with_bias, double threshold) {
        const std::string shape = fmt("%s rows=%d k=%d n=%d%s%s", ggml_type_name(type), s.rows, s.k, s.n,
                                      with_bias ? " +bias" : "", s.offset ? " unaligned" : "");
        run("matmul", shape, threshold, [&] {
            const auto bytes = encode(randn(size_t(s.n) * s.k, 1.0f / std::sqrt(float(s.k))), type);
            const WeightView view{"w", type, s.n, s.k, bytes.data()};
            auto wc = cpu_.pack_weight(view);
            auto wg = gpu_.pack_weight(view);
            const int off = s.offset ? 1 : 0;
            std::vector<float> x = randn(size_t(s.rows) * s.k + off), bias = randn(s.n);
            DeviceArena g(gpu_);
            float* x_g = g.copy(x) + off;
            float* out_g = g.poisoned(size_t(s.rows) * s.n + off) + off;
            std::vector<float> ref(size_t(s.rows) * s.n, kNaN);
            cpu_.matmul(x.data() + off, *wc, with_bias ? bias.data() : nullptr, s.rows, ref.data());
            gpu_.matmul(x_g, *wg, with_bias ? g.copy(bias) : nullptr, s.rows, out_g);
            return rel_error(g.fetch(out_g, ref.size()), ref);
        });
    }

    // Weight shards (kernels/world.h): each GPU shard, packed contiguous from
    // the parent's rows, against the CPU's shard of the same matrix (read in
    // place at the parent's stride): row shards (features), column shards
    // (whole blocks of k; x is the matching slice of the activations).
    void matmul_shards() {
        std::vector<GGMLType> types = {GGMLType::F32, GGMLType::F16, GGMLType::BF16};
        for (GGMLType t : kQuantTypes) types.push_back(t);
        for (GGMLType type : types) {
            const int32_t b = int32_t(std::max<int64_t>(block_elems(type), 32));
            const int32_t k = 8 * b, n = 70, rows = 9;
            const double threshold = type == GGMLType::F32 ? kF32Gemm : type == GGMLType::F16 ? kF16Gemm
                                     : type == GGMLType::BF16 ? kBF16Gemm : kQ8Gemm;
            for (int32_t dim : {0, 1})
                for (int32_t count : {2, 4})
                    for (int32_t index = 0; index < count; ++index) {
                        const std::string shape = fmt("%s shard dim=%d %d/%d rows=%d k=%d n=%d", ggml_type_name(type),
                                                      dim, index, count, rows, k, n);
                        run("matmul", shape, threshold, [&] {
                            const auto bytes = encode(randn(size_t(n) * k, 1.0f / std::sqrt(float(k))), type);
                            const WeightView view{"w", type, n, k, bytes.data()};
                            const ShardSpec spec{dim, index, count};
                            auto wc = cpu_.pack_weight(view, spec);
                            auto wg = gpu_.pack_weight(view, spec);
                            if (wc->rows != wg->rows || wc->cols != wg->cols) return 1e30;
                            std::vector<float> x = randn(size_t(rows) * wc->cols);
                            DeviceArena g(gpu_);
                            float* out_g = g.poisoned(size_t(rows) * wc->rows);
                            std::vector<float> ref(size_t(rows) * wc->rows, kNaN);
                            cpu_.matmul(x.data(), *wc, nullptr, rows, ref.data());
                            gpu_.matmul(g.copy(x), *wg, nullptr, rows, out_g);
                            return rel_error(g.fetch(out_g, ref.size()), ref);
                        });
                    }
        }
    }

    // Matmuls sharing their input (q/k/v, gate/up): one GEMV launch at one row,
    // one conversion for the GEMMs above; mixed types go one at a time.
    void matmul_shared() {
        struct Case {
            int32_t rows, k;
            std::vector<int32_t> ns;
            std::vector<GGMLType> types;
            std::vector<bool> bias;
        };
        const Case cases[] = {
            {1, 256, {256, 64, 64}, {GGMLType::BF16, GGMLType::BF16, GGMLType::BF16}, {true, true, true}},
            {1, 1000, {33, 7, 1}, {GGMLType::F16, GGMLType::F16, GGMLType::F16}, {false, true, false}},
            {1, 4096, {1000, 900}, {GGMLType::BF16, GGMLType::BF16}, {false, false}},
            {64, 256, {256, 64, 64}, {GGMLType::BF16, GGMLType::BF16, GGMLType::BF16}, {true, false, true}},
            {17, 100, {37, 37}, {GGMLType::BF16, GGMLType::BF16}, {false, false}},
            // 2 to 8 rows: the tensor-core GEMV, three matrices in one launch.
            {5, 4096, {512, 128, 128}, {GGMLType::BF16, GGMLType::BF16, GGMLType::BF16}, {true, false, false}},
            {3, 1000, {33, 7, 1}, {GGMLType::F16, GGMLType::F16, GGMLType::F16}, {false, true, false}},
            {8, 2056, {1000, 900}, {GGMLType::BF16, GGMLType::BF16}, {false, false}},
            {1, 256, {64, 64, 64}, {GGMLType::BF16, GGMLType::Q8_0, GGMLType::F32}, {false, false, false}},
            // Q4_K on int8 activations: quantized once, its matrices in one launch, the others
            // (Q6_K's attn_v in a Q4_K_M file) one at a time, before or after them.
            {1, 4096, {1000, 300, 64}, {GGMLType::Q4_K, GGMLType::Q4_K, GGMLType::Q6_K}, {false, true, false}},
            {1, 512, {64, 100}, {GGMLType::Q6_K, GGMLType::Q4_K}, {true, false}},
            {5, 1024, {256, 100}, {GGMLType::Q4_K, GGMLType::Q4_K}, {true, false}},
            {8, 256, {33, 7, 1}, {GGMLType::Q4_K, GGMLType::Q4_K, GGMLType::Q4_K}, {false, true, false}},
            {9, 512, {64, 64}, {GGMLType::Q4_K, GGMLType::Q4_K}, {false, false}},  // past the GEMV: one at a time
        };
        for (const Case& c : cases) {
            std::string types;
            for (GGMLType t : c.types) types += std::string(types.empty() ? "" : "/") + ggml_type_name(t);
            auto has = [&](GGMLType t) { return std::find(c.types.begin(), c.types.end(), t) != c.types.end(); };
            double threshold = has(GGMLType::BF16) ? kBF16Gemm : kF16Gemm;
            for (GGMLType t : c.types)
                if (is_quantized(t)) threshold = std::max(threshold, quant_threshold(t, c.rows, c.k));
            run("matmul", fmt("shared input %s rows=%d k=%d, %zu matrices", types.c_str(), c.rows, c.k, c.ns.size()),
                threshold, [&] {
                    std::vector<std::unique_ptr<PackedWeight>> wc, wg;
                    std::vector<std::vector<uint8_t>> bytes;  // the CPU's weights point into these
                    std::vector<std::vector<float>> biases;
                    DeviceArena g(gpu_);
                    const std::vector<float> x = randn(size_t(c.rows) * c.k);
                    std::vector<Backend::MatmulTarget> tc, tg;
                    std::vector<std::vector<float>> refs;
                    std::vector<float*> outs;
                    for (size_t i = 0; i < c.ns.size(); ++i) {
                        bytes.push_back(encode(randn(size_t(c.ns[i]) * c.k, 1.0f / std::sqrt(float(c.k))), c.types[i]));
                        const WeightView view{"w", c.types[i], c.ns[i], c.k, bytes.back().data()};
                        wc.push_back(cpu_.pack_weight(view));
                        wg.push_back(gpu_.pack_weight(view));
                        biases.push_back(randn(c.ns[i]));
                        refs.emplace_back(size_t(c.rows) * c.ns[i], kNaN);
                        outs.push_back(g.poisoned(size_t(c.rows) * c.ns[i]));
                    }
                    for (size_t i = 0; i < c.ns.size(); ++i) {
                        tc.push_back({wc[i].get(), c.bias[i] ? biases[i].data() : nullptr, refs[i].data()});
                        tg.push_back({wg[i].get(), c.bias[i] ? g.copy(biases[i]) : nullptr, outs[i]});
                    }
                    cpu_.matmul_shared_input(x.data(), tc, c.rows);
                    gpu_.matmul_shared_input(g.copy(x), tg, c.rows);
                    double err = 0.0;
                    for (size_t i = 0; i < c.ns.size(); ++i) {
                        const double e = rel_error(g.fetch(outs[i], refs[i].size()), refs[i]);
                        if (!(e <= err)) err = e;  // NaN wins
                    }
                    return err;
                });
        }
    }

    // SwiGLU and GeGLU: four elements a thread where the pointers are 16-byte
    // aligned (with a tail of 1-3), one at a time where one is not.
    // The bf16 copy that a norm or SwiGLU writes for the bf16 GEMM reading its
    // output next (the layers' weights, "blk.*", in bf16 or widened from Q4_K
    // past 64 rows), and the int8 copy for the int8 GEMV reading it (Q4_K, Q6_K
    // and Q8_0 up to 8 rows): a block's norm -> q/k, SwiGLU -> down against the
    // CPU; and a buffer rewritten from the host between norm and matmul, whose
    // copy is stale.
    void bf16_copy() {
        for (GGMLType type : {GGMLType::BF16, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0})
            for (int32_t rows : {1, 2, 8, 9, 100}) {
                if (type != GGMLType::BF16 && rows > 8 && rows < 65) continue;
                const bool int8 = type != GGMLType::BF16 && rows <= 8;
                run(int8 ? "int8 copy" : "bf16 copy",
                    fmt("%s rows=%d: norm -> q/k, swiglu -> down, rewritten input", ggml_type_name(type), rows),
                    type == GGMLType::BF16 ? kBF16Gemm : quant_threshold(type, rows, 256),
                    [&] { return bf16_copy_case(type, rows); });
            }
    }

    double bf16_copy_case(GGMLType type, int32_t rows) {
        constexpr int32_t dim = 256, ffn = 512;
        auto weight = [&](const char* name, int32_t n, int32_t k, std::vector<std::vector<uint8_t>>& keep) {
            keep.push_back(encode(randn(size_t(n) * k, 1.0f / std::sqrt(float(k))), type));
            const WeightView view{name, type, n, k, keep.back().data()};
            return std::make_pair(cpu_.pack_weight(view), gpu_.pack_weight(view));
        };
        std::vector<std::vector<uint8_t>> bytes;
        auto wq = weight("blk.0.attn_q.weight", dim, dim, bytes), wk = weight("blk.0.attn_k.weight", 64, dim, bytes);
        auto down = weight("blk.0.ffn_down.weight", dim, ffn, bytes);
        std::vector<float> residual = randn(size_t(rows) * dim), norm_w = randn(dim), gate = randn(size_t(rows) * ffn, 3.0f),
                           up = randn(size_t(rows) * ffn), fresh = randn(size_t(rows) * dim);
        DeviceArena g(gpu_);
        float* res_g = g.copy(residual);
        float *normed_g = g.poisoned(size_t(rows) * dim), *q_g = g.poisoned(size_t(rows) * dim),
              *k_g = g.poisoned(size_t(rows) * 64), *h_g = g.poisoned(size_t(rows) * ffn),
              *down_g = g.poisoned(size_t(rows) * dim), *stale_g = g.poisoned(size_t(rows) * dim);
        float *nw_g = g.copy(norm_w), *gate_g = g.copy(gate), *up_g = g.copy(up);
        std::vector<float> normed(size_t(rows) * dim), q(size_t(rows) * dim), k(size_t(rows) * 64),
            h(size_t(rows) * ffn), out(size_t(rows) * dim), stale(size_t(rows) * dim);

        cpu_.add_rms_norm(residual.data(), nullptr, norm_w.data(), 1e-5f, rows, dim, normed.data());
        const Backend::MatmulTarget tc[] = {{wq.first.get(), nullptr, q.data()}, {wk.first.get(), nullptr, k.data()}};
        cpu_.matmul_shared_input(normed.data(), tc, rows);
        cpu_.swiglu(gate.data(), up.data(), rows, ffn, h.data());
        cpu_.matmul(h.data(), *down.first, nullptr, rows, out.data());
        cpu_.matmul(fresh.data(), *wq.first, nullptr, rows, stale.data());

        gpu_.add_rms_norm(res_g, nullptr, nw_g, 1e-5f, rows, dim, normed_g);
        const Backend::MatmulTarget tg[] = {{wq.second.get(), nullptr, q_g}, {wk.second.get(), nullptr, k_g}};
        gpu_.matmul_shared_input(normed_g, tg, rows);
        gpu_.swiglu(gate_g, up_g, rows, ffn, h_g);
        gpu_.matmul(h_g, *down.second, nullptr, rows, down_g);
        gpu_.add_rms_norm(res_g, nullptr, nw_g, 1e-5f, rows, dim, normed_g);
        gpu_.upload(normed_g, fresh.data(), fresh.size() * sizeof(float));
        gpu_.matmul(normed_g, *wq.second, nullptr, rows, stale_g);

        double err = 0.0;
        const std::pair<float*, const std::vector<float>*> outs[] = {{q_g, &q}, {k_g, &k}, {down_g, &out}, {stale_g, &stale}};
        for (auto [dev, ref] : outs) {
            const double e = rel_error(g.fetch(dev, ref->size()), *ref);
            if (!(e <= err)) err = e;  // NaN wins
        }
        return err;
    }

    // Disaggregation's KV copies: random pools (random bytes: any bf16 or f32
    // pattern), blocks out of order, read out against the CPU's, written back
    // into other blocks, and every pool compared whole (the others untouched).
    void kv_blocks_io() {
        for (KVDType dtype : {KVDType::F32, KVDType::BF16})
            run("kv blocks io", fmt("%s: 4 blocks of 40 out, 3 in, layer 1 of 3", kv_dtype_name(dtype)), 0.0,
                [&] { return kv_blocks_io_case(dtype); });
    }

    double kv_blocks_io_case(KVDType dtype) {
        const KVCacheShape shape{3, 40, 16, 2, 64, dtype};
        const size_t layer_bytes = shape.bytes_per_layer(), block = shape.bytes_per_block();
        auto random_bytes = [&](size_t n) {
            std::vector<uint8_t> v(n);
            for (uint8_t& b : v) b = uint8_t(rng_());
            return v;
        };
        DeviceArena g(gpu_);
        std::vector<std::vector<uint8_t>> host;  // the CPU's pools: K and V of each layer
        KVCache c{shape, {}, {}}, d{shape, {}, {}};
        for (int32_t l = 0; l < shape.n_layers; ++l)
            for (int kv = 0; kv < 2; ++kv) {
                host.push_back(random_bytes(layer_bytes));
                (kv ? c.v : c.k).push_back(host.back().data());
                (kv ? d.v : d.k).push_back(g.copy(host.back()));
            }
        const int32_t out_blocks[] = {7, 3, 39, 0}, in_blocks[] = {5, 6, 38};
        std::vector<uint8_t> kc(4 * block), vc(4 * block), kg(4 * block), vg(4 * block);
        cpu_.kv_blocks_to_host(c, out_blocks, 1, kc.data(), vc.data());
        gpu_.kv_blocks_to_host(d, out_blocks, 1, kg.data(), vg.data());
        if (kc != kg || vc != vg) return 1.0;
        const std::vector<uint8_t> kin = random_bytes(3 * block), vin = random_bytes(3 * block);
        cpu_.kv_blocks_from_host(c, in_blocks, 1, kin.data(), vin.data());
        gpu_.kv_blocks_from_host(d, in_blocks, 1, kin.data(), vin.data());
        for (int32_t l = 0; l < shape.n_layers; ++l)
            for (int kv = 0; kv < 2; ++kv) {
                const auto* dev = static_cast<const uint8_t*>((kv ? d.v : d.k)[size_t(l)]);
                if (g.fetch(dev, layer_bytes) != host[size_t(2 * l + kv)]) return 1.0;
            }
        return 0.0;
    }

    void swiglu() { gated("swiglu", {{1, 1}, {7, 33}, {3, 172}, {64, 11008}, {512, 1003}}, &Backend::swiglu); }
    void geglu() { gated("geglu", {{1, 1}, {7, 33}, {3, 2048}, {64, 6912}, {512, 1003}}, &Backend::geglu); }

    using GatedOp = void (Backend::*)(const float*, const float*, int32_t, int32_t, float*);
    void gated(const char* op, std::initializer_list<std::pair<int32_t, int32_t>> shapes, GatedOp fn) {
        for (auto [rows, dim] : shapes)
            for (int off : {0, 1}) {
                run(op, fmt("rows=%d dim=%d%s", rows, dim, off ? " unaligned" : ""), kF32, [&] {
                    const size_t n = size_t(rows) * dim;
                    const std::vector<float> gate = randn(n + off, 3.0f), up = randn(n + off);
                    DeviceArena g(gpu_);
                    std::vector<float> ref(n, kNaN);
                    float* out = g.poisoned(n + off) + off;
                    (cpu_.*fn)(gate.data() + off, up.data() + off, rows, dim, ref.data());
                    (gpu_.*fn)(g.copy(gate) + off, g.copy(up) + off, rows, dim, out);
                    return rel_error(g.fetch(out, n), ref);
                });
            }
    }

    // ---- mixture of experts --------------------------------------------------------------------

    void moe_route() {
        struct Case {
            int32_t rows, n_experts, k;
        };
        const Case cases[] = {{1, 8, 2}, {7, 8, 1}, {300, 60, 4}, {5, 128, 8}, {64, 128, 8}, {3, 1024, 32}, {9, 33, 33}};
        for (const Case& c : cases)
            for (bool renormalize : {false, true})
                run("moe_route", fmt("rows=%d experts=%d k=%d%s", c.rows, c.n_experts, c.k, renormalize ? " renorm" : ""),
                    kF32, [&] {
                        const std::vector<float> logits = randn(size_t(c.rows) * c.n_experts, 2.0f);
                        const MoeRouting routing{c.n_experts, c.k, renormalize};
                        const size_t n = size_t(c.rows) * c.k;
                        std::vector<int32_t> ids(n, -1);
                        std::vector<float> weights(n, kNaN);
                        cpu_.moe_route(logits.data(), c.rows, routing, ids.data(), weights.data());
                        DeviceArena g(gpu_);
                        auto* ids_g = g.copy(std::vector<int32_t>(n, -1));
                        float* weights_g = g.poisoned(n);
                        gpu_.moe_route(g.copy(logits), c.rows, routing, ids_g, weights_g);
                        // A different expert anywhere is a failure (1); else the weights' error.
                        return g.fetch(ids_g, n) != ids ? 1.0 : rel_error(g.fetch(weights_g, n), weights);
                    });
    }

    // The experts' FFN against the CPU on the same routing: the GEMV path (up to
    // cuda::kMoeGemvMaxRows rows), the grouped GEMM (16- and 64-row tiles, a
    // partial last stretch of k and CTA of features), chunks of kMoeChunkRows,
    // and a routing that sends every row to the same experts (one expert's run of
    // many tiles, the others empty). Slices: expert parallelism's part of the
    // experts on the last of `slices` ranks (pairs routed elsewhere left out;
    // with 8 slices of 8 experts, one expert, fewer than k).
    void moe_experts() {
        struct Case {
            int32_t rows, n_experts, k, dim, ffn;
            bool skewed;
            int32_t slices = 1;
        };
        const GGMLType types[] = {GGMLType::F32,  GGMLType::F16,  GGMLType::BF16, GGMLType::Q8_0,
                                  GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1,
                                  GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K};
        for (GGMLType type : types) {
            const int32_t b = is_quantized(type) ? int32_t(block_elems(type)) : 32;  // experts' rows: whole blocks
            const Case cases[] = {{1, 8, 2, 2 * b, 3 * b, false},  {8, 16, 4, 512, 256 + b, false},
                                  {9, 8, 2, 3 * b, 2 * b, false},  {40, 128, 8, 512, 256, false},
                                  {300, 8, 2, 1024 + b, 2 * b, false}, {100, 8, 2, 2 * b, 256, true},
                                  {1100, 60, 4, b, 2 * b, false},
                                  {1, 8, 2, 2 * b, 3 * b, false, 2}, {9, 8, 2, 3 * b, 2 * b, false, 4},
                                  {40, 128, 8, 512, 256, false, 4}, {300, 8, 2, 1024 + b, 2 * b, false, 8}};
            for (const Case& c : cases) {
                const bool gemv = c.rows <= cuda::kMoeGemvMaxRows || type == GGMLType::F32;  // F32: exact at any size
                const double threshold = is_quantized(type)      ? kQ8Ffn
                                         : !gemv                 ? kBF16Gemm
                                         : type == GGMLType::F32 ? kF32Gemm
                                                                 : kF16Gemm;
                run("moe_experts",
                    fmt("%s rows=%d experts=%d k=%d dim=%d ffn=%d%s%s", ggml_type_name(type), c.rows, c.n_experts, c.k,
                        c.dim, c.ffn, c.skewed ? " skewed" : "",
                        c.slices > 1 ? fmt(" slice %d of %d", c.slices - 1, c.slices).c_str() : ""),
                    threshold, [&] {
                        return moe_experts_case(type, c.rows, c.n_experts, c.k, c.dim, c.ffn, c.skewed, c.slices);
                    });
            }
        }
    }

    double moe_experts_case(GGMLType type, int32_t rows, int32_t n_experts, int32_t k, int32_t dim, int32_t ffn,
                            bool skewed, int32_t slices) {
        std::vector<std::vector<uint8_t>> files;  // the CPU reads plain weights in place: they outlive the case
        const int32_t local = n_experts / slices, first = n_experts - local;  // the last slice
        auto experts = [&](const char* name, int32_t n, int32_t cols) {
            files.push_back(encode(randn(size_t(n_experts) * n * cols, 1.0f / std::sqrt(float(cols))), type));
            const size_t expert_bytes = files.back().size() / size_t(n_experts);
            const WeightView view{name, type, int64_t(local) * n, cols, files.back().data() + first * expert_bytes};
            auto packs = std::pair{cpu_.pack_experts(view, local), gpu_.pack_experts(view, local)};
            packs.first->first_expert = packs.second->first_expert = first;
            return packs;
        };
        const auto gate = experts("gate", ffn, dim), up = experts("up", ffn, dim), down = experts("down", dim, ffn);
        std::vector<float> logits = randn(size_t(rows) * n_experts);
        if (skewed)
            for (int32_t r = 0; r < rows; ++r)
                for (int32_t j = 0; j < k; ++j) logits[size_t(r) * n_experts + j] += 20.0f;
        const size_t pairs = size_t(rows) * k;
        std::vector<int32_t> ids(pairs);
        std::vector<float> weights(pairs);
        cpu_.moe_route(logits.data(), rows, {n_experts, k, true}, ids.data(), weights.data());
        const std::vector<float> x = randn(size_t(rows) * dim);
        std::vector<float> ref(size_t(rows) * dim, kNaN);
        cpu_.moe_experts(x.data(), ids.data(), weights.data(), rows, k, *gate.first, *up.first, *down.first, ref.data());
        DeviceArena g(gpu_);
        float* out = g.poisoned(ref.size());
        gpu_.moe_experts(g.copy(x), g.copy(ids), g.copy(weights), rows, k, *gate.second, *up.second, *down.second, out);
        return rel_error(g.fetch(out, ref.size()), ref);
    }

    void add_sigmoid_gated() {
        for (auto [rows, dim] : {std::pair{1, 64}, {7, 33}, {300, 2048}})
            run("add_sigmoid_gated", fmt("rows=%d dim=%d", rows, dim), kF32, [&] {
                const size_t n = size_t(rows) * dim;
                const std::vector<float> gate = randn(rows, 3.0f), y = randn(n);
                std::vector<float> out = randn(n);
                DeviceArena g(gpu_);
                float* out_g = g.copy(out);
                cpu_.add_sigmoid_gated(gate.data(), y.data(), rows, dim, out.data());
                gpu_.add_sigmoid_gated(g.copy(gate), g.copy(y), rows, dim, out_g);
                return rel_error(g.fetch(out_g, n), out);
            });
    }

    void scale() {
        for (int64_t n : {1, 640, 100003})
            run("scale", fmt("n=%lld", (long long)n), kF32, [&] {
                std::vector<float> x = randn(size_t(n));
                DeviceArena g(gpu_);
                float* xg = g.copy(x);
                cpu_.scale(x.data(), n, 25.298f);
                gpu_.scale(xg, n, 25.298f);
                return rel_error(g.fetch(xg, size_t(n)), x);
            });
    }

    void gather_logit_rows() {
        for (int32_t dim : {1, 64, 129, 4096})
            for (const PlanKind& kind : kPlanKinds)
                run("gather_logit_rows", fmt("dim=%d %s(%s)", dim, kind.name, seqs_text(kind.seqs).c_str()), 0.0, [&] {
                    StepPlan plan = make_plan(rng_, kind.seqs, 16, blocks_needed(kind.seqs, 16), 1000);
                    plan.logits_rows.push_back(0);  // repeats and any order are allowed
                    std::reverse(plan.logits_rows.begin(), plan.logits_rows.end());
                    set_step(plan, 16);
                    const size_t n_out = plan.logits_rows.size() * dim;
                    const std::vector<float> x = randn(size_t(plan.num_tokens()) * dim);
                    DeviceArena g(gpu_);
                    std::vector<float> ref(n_out, kNaN);
                    float* out = g.poisoned(n_out);
                    cpu_.gather_logit_rows(x.data(), dim, ref.data());
                    gpu_.gather_logit_rows(g.copy(x), dim, out);
                    return rel_error(g.fetch(out, n_out), ref);
                });
    }

    // Ids must be equal: err is the number of rows whose ids differ.
    void sample() {
        SamplingParams greedy;
        greedy.temperature = 0.0f;
        SamplingParams tempered;
        tempered.temperature = 0.8f;
        tempered.top_k = 40;
        tempered.top_p = 0.95f;
        tempered.seed = 42;
        SamplingParams penalised = greedy;
        penalised.repetition_penalty = 1.3f;
        penalised.presence_penalty = 0.5f;
        SamplingParams min_p;
        min_p.temperature = 1.0f;
        min_p.min_p = 0.05f;
        min_p.seed = 7;
        for (int32_t vocab : {2, 512, 32000, 151936})
            run("sample", fmt("vocab=%d rows=6 (greedy, tie, all-equal, top-k/p, penalties, min-p)", vocab), 0.0, [&] {
                const int32_t rows = 6;
                std::vector<float> logits = randn(size_t(rows) * vocab, 2.0f);
                std::uniform_int_distribution<int32_t> id(0, vocab - 1);
                float* tie = logits.data() + vocab;  // row 1: the maximum twice; the lower id must win
                const int32_t a = id(rng_), b = id(rng_);
                tie[a] = tie[b] = *std::max_element(tie, tie + vocab) + 1.0f;
                std::fill(logits.begin() + 2 * vocab, logits.begin() + 3 * vocab, 0.5f);  // row 2: all equal
                const std::vector<int32_t> prompt = {id(rng_), id(rng_), id(rng_)}, output = {id(rng_), id(rng_)};
                const SamplingParams* params[rows] = {&greedy, &greedy, &greedy, &tempered, &penalised, &min_p};
                std::vector<SamplingRow> srows;
                for (int32_t r = 0; r < rows; ++r) srows.push_back({params[r], uint64_t(r), 100 + r, prompt, output});

                DeviceArena g(gpu_);
                float* logits_g = g.copy(logits);
                std::vector<int32_t> ids_c(rows, -1), ids_g(rows, -1);
                cpu_.sample(logits.data(), vocab, srows, ids_c.data());
                gpu_.sample(logits_g, vocab, srows, ids_g.data());
                double mismatches = ids_c[1] != std::min(a, b) || ids_c[2] != 0;  // the reference itself
                for (int32_t r = 0; r < rows; ++r) mismatches += ids_c[r] != ids_g[r];
                return mismatches;
            });
    }

    // 64 rows mixing every processor and sampler, with seeds, streams and
    // positions varying: the device sampler must pick the reference's ids.
    void sample_mixed() {
        for (int32_t vocab : {2, 512, 32000, 128256, 151936, 262144})
            run("sample", fmt("vocab=%d rows=64 (mixed processors, samplers, seeds)", vocab), 0.0, [&] {
                constexpr int32_t rows = 64;
                std::vector<float> logits = randn(size_t(rows) * vocab, 2.0f);
                std::vector<SamplingParams> params(rows);
                std::vector<std::vector<int32_t>> prompts(rows), outputs(rows), suppressed(rows);
                std::vector<std::vector<uint32_t>> masks(rows);
                for (int32_t r = 0; r < rows; ++r)
                    make_sampling_row(r, vocab, logits.data() + size_t(r) * vocab, params[r], prompts[r], outputs[r],
                                      suppressed[r], masks[r]);
                std::vector<SamplingRow> srows;
                for (int32_t r = 0; r < rows; ++r) {
                    SamplingRow row;
                    row.params = &params[r];
                    row.stream = uint64_t(r % 3) + (r % 7 == 6 ? uint64_t(1) << 36 : 0);
                    row.position = 1000 + 7 * r + (r % 5 == 4 ? int64_t(1) << 33 : 0);
                    row.prompt_tokens = prompts[r];
                    row.output_tokens = outputs[r];
                    row.suppressed_ids = suppressed[r];
                    row.allowed_mask = masks[r];
                    srows.push_back(row);
                }
                DeviceArena g(gpu_);
                float* logits_g = g.copy(logits);  // before the CPU edits its copy
                std::vector<int32_t> ids_c(rows, -1), ids_g(rows, -1);
                cpu_.sample(logits.data(), vocab, srows, ids_c.data());
                gpu_.sample(logits_g, vocab, srows, ids_g.data());
                double mismatches = 0;
                for (int32_t r = 0; r < rows; ++r) {
                    if (ids_c[r] == ids_g[r]) continue;
                    ++mismatches;
                    std::printf("  sample vocab=%d row %d (kind %d): cpu %d, gpu %d\n", vocab, r, r % 16, ids_c[r],
                                ids_g[r]);
                }
                return mismatches;
            });
    }

    // 64 rows carrying speculative drafts (sample_drafts.h): the device must
    // verify each as the reference does (accept, or draw the replacement from
    // the residual). The reference must also differ from plain sampling of the
    // same rows in at least 8 rows, so that a device ignoring drafts fails.
    void sample_drafts() {
        for (int32_t vocab : {512, 32000, 151936})
            run("sample", fmt("vocab=%d rows=64 (speculative drafts: one-hot, q, greedy, masked)", vocab), 0.0, [&] {
                constexpr int32_t rows = 64;
                const std::vector<float> logits = randn(size_t(rows) * vocab, 2.0f);
                std::vector<gpu_test::DraftRowData> data(rows);
                std::vector<SamplingRow> srows, plain;
                for (int32_t r = 0; r < rows; ++r)
                    gpu_test::make_draft_row(rng_, r, vocab, logits.data() + size_t(r) * vocab, data[r]);
                for (int32_t r = 0; r < rows; ++r) {
                    srows.push_back(gpu_test::draft_sampling_row(r, data[r]));
                    plain.push_back(srows.back());
                    plain.back().draft_token = -1;
                    plain.back().draft_probs = {};
                }
                DeviceArena g(gpu_);
                float* logits_g = g.copy(logits);
                std::vector<float> logits_c = logits, logits_plain = logits;
                std::vector<int32_t> ids_c(rows, -1), ids_g(rows, -1), ids_plain(rows, -1);
                cpu_.sample(logits_c.data(), vocab, srows, ids_c.data());
                cpu_.sample(logits_plain.data(), vocab, plain, ids_plain.data());
                gpu_.sample(logits_g, vocab, srows, ids_g.data());
                double mismatches = 0;
                int32_t changed = 0;
                for (int32_t r = 0; r < rows; ++r) {
                    changed += ids_c[r] != ids_plain[r];
                    if (ids_c[r] == ids_g[r]) continue;
                    ++mismatches;
                    std::printf("  sample drafts vocab=%d row %d (kind %d, draft %d): cpu %d, gpu %d, plain %d\n", vocab,
                                r, r % 16, data[r].draft, ids_c[r], ids_g[r], ids_plain[r]);
                }
                if (changed < 8) {
                    std::printf("  sample drafts vocab=%d: only %d rows differ from plain sampling\n", vocab, changed);
                    ++mismatches;
                }
                return mismatches;
            });
    }

    // Grammar masks as the engine sends them (PlanBuilder::fill_masks): every
    // row masked, dense masks (a random half of the vocabulary) and sparse ones
    // (a JSON string's few tokens), greedy and sampled rows, at batch 1 to 256 on
    // the 262k vocabulary: the upload and the masked sampler pick the reference's ids.
    void sample_masked() {
        for (int32_t vocab : {151936, 262144})
            for (int32_t rows : {1, 7, 64, 256})
                run("sample", fmt("vocab=%d rows=%d (grammar masks on every row)", vocab, rows), 0.0, [&] {
                    std::vector<float> logits = randn(size_t(rows) * vocab, 3.0f);
                    std::vector<SamplingParams> params(rows);
                    std::vector<std::vector<uint32_t>> masks(rows);
                    std::vector<SamplingRow> srows;
                    for (int32_t r = 0; r < rows; ++r) {
                        std::vector<uint32_t>& m = masks[r];
                        m.assign(size_t(vocab + 31) / 32, 0u);
                        if (r % 2 == 0) {
                            for (uint32_t& w : m) w = uint32_t(rng_());  // about half the tokens
                        } else {
                            std::uniform_int_distribution<int32_t> id(0, vocab - 1);
                            for (int i = 0; i < 1 + r % 40; ++i) {
                                const int32_t t = id(rng_);
                                m[size_t(t) / 32] |= 1u << (t % 32);
                            }
                        }
                        params[r].temperature = r % 3 == 0 ? 0.0f : 0.7f + 0.1f * float(r % 5);  // greedy every third
                        if (r % 6 == 1) params[r].top_k = 20;
                        if (r % 6 == 2) params[r].top_p = 0.9f;
                        params[r].seed = uint64_t(rng_());
                        SamplingRow row;
                        row.params = &params[r];
                        row.stream = uint64_t(r);
                        row.position = 50 + r;
                        row.allowed_mask = m;
                        srows.push_back(row);
                    }
                    DeviceArena g(gpu_);
                    float* logits_g = g.copy(logits);
                    std::vector<int32_t> ids_c(rows, -1), ids_g(rows, -1);
                    cpu_.sample(logits.data(), vocab, srows, ids_c.data());
                    gpu_.sample(logits_g, vocab, srows, ids_g.data());
                    double bad = 0;
                    for (int32_t r = 0; r < rows; ++r) {
                        const bool allowed = ids_g[r] >= 0 && ids_g[r] < vocab &&
                                             (masks[r][size_t(ids_g[r]) / 32] >> (ids_g[r] % 32) & 1u);
                        if (ids_c[r] == ids_g[r] && allowed) continue;
                        ++bad;
                        std::printf("  sample masked vocab=%d row %d: cpu %d, gpu %d%s\n", vocab, r, ids_c[r], ids_g[r],
                                    allowed ? "" : " (not allowed by the mask)");
                    }
                    return bad;
                });
    }

    // --quantization fp8 (gpu8: a CUDA backend with it on): "blk.*" weights
    // become E4M3 with a per-tensor scale. The references run on the CPU backend
    // in f32 over the values the device computes with: scale * e4m3(w / scale),
    // and for the GEMM (rows > 8) the activations quantized the same way.
    void fp8(Backend& gpu8) {
        struct Case {
            int32_t n, k, rows;
            GGMLType type;
        };
        std::vector<Case> cases;
        const std::pair<int32_t, int32_t> shapes[] = {{64, 64}, {4096, 4096}, {1000, 2048}};
        int i = 0;
        for (auto [n, k] : shapes)
            for (int32_t rows : {1, 3, 8, 17, 512}) cases.push_back({n, k, rows, i++ % 2 ? GGMLType::F32 : GGMLType::BF16});
        cases.push_back({14336, 4096, 512, GGMLType::BF16});
        cases.push_back({64, 4096, 5, GGMLType::F16});
        for (const Case& c : cases) {
            const bool gemm = c.rows > 8;
            run("fp8", fmt("%s %s rows=%d k=%d n=%d%s", gemm ? "gemm" : "gemv", ggml_type_name(c.type), c.rows, c.k,
                           c.n, c.rows == 3 || c.rows == 17 ? " +bias" : ""),
                gemm ? kFp8Gemm : kFp8Gemv, [&] { return fp8_case(gpu8, c.type, c.n, c.k, c.rows, false, c.rows == 3 || c.rows == 17); });
        }
        // q/k/v through matmul_shared_input: one FP8 GEMV launch over three
        // matrices, each with its own scale (weights of different magnitudes),
        // a bias on one; above kGemvMaxRows the activations are quantized once
        // and each matrix goes through the FP8 GEMM.
        for (int32_t rows : {1, 5, 8, 17, 512})
            run("fp8", fmt("%s shared input q/k/v rows=%d k=512 n=96,32,32 +bias", rows > 8 ? "gemm" : "gemv", rows),
                rows > 8 ? kFp8Gemm : kFp8Gemv, [&] { return fp8_shared_case(gpu8, rows); });
        // The real error of fp8, against the plain f32 product.
        for (int32_t rows : {1, 512})
            run("fp8", fmt("%s vs f32 BF16 rows=%d k=4096 n=4096", rows > 8 ? "gemm" : "gemv", rows), kFp8Real,
                [&] { return fp8_case(gpu8, GGMLType::BF16, 4096, 4096, rows, true, false); });
        // Not converted: the embedding table, the LM head, and rows that are not
        // whole 16-byte words; each must give what the plain backend gives.
        const std::pair<const char*, std::pair<int32_t, int32_t>> kept[] = {
            {"token_embd.weight", {1000, 256}}, {"output.weight", {1000, 256}}, {"blk.0.ffn_down.weight", {64, 40}}};
        for (const auto& [name, nk] : kept)
            for (int32_t rows : {1, 17})
                run("fp8", fmt("kept %s rows=%d k=%d n=%d", name, rows, nk.second, nk.first), kF32, [&, name = name, nk = nk] {
                    const auto bytes = encode(randn(size_t(nk.first) * nk.second, 0.1f), GGMLType::BF16);
                    const WeightView view{name, GGMLType::BF16, nk.first, nk.second, bytes.data()};
                    auto w8 = gpu8.pack_weight(view);
                    auto wg = gpu_.pack_weight(view);
                    if (w8->converted_bytes != 0) return double(INFINITY);
                    const std::vector<float> x = randn(size_t(rows) * nk.second);
                    DeviceArena g(gpu_);
                    const float* x_g = g.copy(x);
                    float* out8 = g.poisoned(size_t(rows) * nk.first);
                    float* out = g.poisoned(size_t(rows) * nk.first);
                    gpu8.matmul(x_g, *w8, nullptr, rows, out8);
                    gpu8.synchronize();
                    gpu_.matmul(x_g, *wg, nullptr, rows, out);
                    return rel_error(g.fetch(out8, size_t(rows) * nk.first), g.fetch(out, size_t(rows) * nk.first));
                });
    }

    // ||gpu8 - ref|| / ||ref|| for one fp8 matmul; against_f32: ref is the unquantized product.
    double fp8_case(Backend& gpu8, GGMLType type, int32_t n, int32_t k, int32_t rows, bool against_f32, bool with_bias) {
        const std::string name = "blk.0.ffn_up.weight";
        const auto bytes = encode(randn(size_t(n) * k, 1.0f / std::sqrt(float(k))), type);
        const WeightView view{name, type, n, k, bytes.data()};
        auto w8 = gpu8.pack_weight(view);
        if (w8->converted_bytes != uint64_t(n) * uint64_t(k)) return INFINITY;  // not converted
        // The weight's values as stored (bf16/f16 decoded), and what the device makes of them.
        std::vector<float> w(size_t(n) * k);
        for (size_t i = 0; i < w.size(); ++i) {
            if (type == GGMLType::F32) {
                std::memcpy(&w[i], &bytes[4 * i], 4);
            } else {
                uint16_t h;
                std::memcpy(&h, &bytes[2 * i], 2);
                w[i] = type == GGMLType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
            }
        }
        // Activations with a few outliers, as real ones have (they set the scale).
        std::vector<float> x = randn(size_t(rows) * k);
        for (int j = 0; j < 4; ++j) x[std::uniform_int_distribution<size_t>(0, x.size() - 1)(rng_)] *= 8.0f;
        const std::vector<float> bias = randn(n);
        std::vector<float> w_ref = w, x_ref = x;
        if (!against_f32) {
            w_ref = fp8_host::dequantized(w);
            if (rows > cuda_fp8_gemv_max_rows) x_ref = fp8_host::dequantized(x);
        }
        std::vector<uint8_t> w_ref_bytes(w_ref.size() * 4);
        std::memcpy(w_ref_bytes.data(), w_ref.data(), w_ref_bytes.size());
        auto wc = cpu_.pack_weight({"ref", GGMLType::F32, n, k, w_ref_bytes.data()});
        std::vector<float> ref(size_t(rows) * n, kNaN);
        cpu_.matmul(x_ref.data(), *wc, with_bias ? bias.data() : nullptr, rows, ref.data());

        DeviceArena g(gpu8);
        float* out_g = g.poisoned(ref.size());
        gpu8.matmul(g.copy(x), *w8, with_bias ? g.copy(bias) : nullptr, rows, out_g);
        return rel_error(g.fetch(out_g, ref.size()), ref);
    }
    // The worst ||gpu8 - ref|| / ||ref|| of three FP8 matrices sharing one input.
    double fp8_shared_case(Backend& gpu8, int32_t rows) {
        constexpr int32_t k = 512;
        const int32_t ns[3] = {96, 32, 32};
        const float magnitudes[3] = {0.05f, 1.0f, 0.3f};
        std::vector<float> x = randn(size_t(rows) * k);
        const std::vector<float> bias = randn(ns[1]);
        std::vector<float> x_ref = x;
        if (rows > cuda_fp8_gemv_max_rows) x_ref = fp8_host::dequantized(x);
        DeviceArena g(gpu8);
        const float* x_g = g.copy(x);
        std::vector<std::unique_ptr<PackedWeight>> w8;
        std::vector<Backend::MatmulTarget> targets;
        std::vector<std::vector<float>> refs;
        std::vector<float*> outs;
        for (int i = 0; i < 3; ++i) {
            const std::vector<float> w = randn(size_t(ns[i]) * k, magnitudes[i] / std::sqrt(float(k)));
            std::vector<uint8_t> bytes(w.size() * 4);
            std::memcpy(bytes.data(), w.data(), bytes.size());
            const std::string name = fmt("blk.0.attn_%c.weight", "qkv"[i]);
            w8.push_back(gpu8.pack_weight({name, GGMLType::F32, ns[i], k, bytes.data()}));
            if (w8.back()->converted_bytes != uint64_t(ns[i]) * k) return INFINITY;  // not converted
            const std::vector<float> w_ref = fp8_host::dequantized(w);
            std::vector<uint8_t> ref_bytes(w_ref.size() * 4);
            std::memcpy(ref_bytes.data(), w_ref.data(), ref_bytes.size());
            auto wc = cpu_.pack_weight({"ref", GGMLType::F32, ns[i], k, ref_bytes.data()});
            refs.emplace_back(size_t(rows) * ns[i], kNaN);
            cpu_.matmul(x_ref.data(), *wc, i == 1 ? bias.data() : nullptr, rows, refs.back().data());
            outs.push_back(g.poisoned(size_t(rows) * ns[i]));
        }
        const float* bias_g = g.copy(bias);
        for (int i = 0; i < 3; ++i) targets.push_back({w8[size_t(i)].get(), i == 1 ? bias_g : nullptr, outs[size_t(i)]});
        gpu8.matmul_shared_input(x_g, targets, rows);
        double err = 0.0;
        for (int i = 0; i < 3; ++i) {
            const double e = rel_error(g.fetch(outs[size_t(i)], refs[size_t(i)].size()), refs[size_t(i)]);
            if (!(e <= err)) err = e;  // NaN wins
        }
        return err;
    }
    static constexpr int32_t cuda_fp8_gemv_max_rows = 8;  // kernels/cuda/cuda_ops.h's kGemvMaxRows

private:
    void run(const std::string& op, const std::string& shape, double threshold, const std::function<double()>& body) {
        if (!filter_.empty() && op.find(filter_) == std::string::npos) return;
        double err = NAN;
        std::string note;
        try {
            err = body();
        } catch (const std::exception& e) {
            note = std::string("  error: ") + e.what();
        }
        const bool ok = note.empty() && err <= threshold;  // NaN fails
        std::printf("%-17s %-72s %10.3e %8.1e  %s%s\n", op.c_str(), shape.c_str(), err, threshold, ok ? "PASS" : "FAIL",
                    note.c_str());
        std::fflush(stdout);
        ++(ok ? passed : failed);
    }

    void set_step(const StepPlan& plan, int32_t block_size) {
        cpu_.set_step(plan, block_size);
        gpu_.set_step(plan, block_size);
    }

    // Row r of sample_mixed: its kind is r % 16.
    void make_sampling_row(int32_t r, int32_t vocab, const float* logits, SamplingParams& p,
                           std::vector<int32_t>& prompt, std::vector<int32_t>& output,
                           std::vector<int32_t>& suppressed, std::vector<uint32_t>& mask) {
        std::uniform_int_distribution<int32_t> id(0, vocab - 1);
        p.seed = uint64_t(rng_()) << 32 | rng_();
        for (int i = 0; i < 20; ++i) prompt.push_back(id(rng_));
        for (int i = 0; i < 12; ++i) output.push_back(i % 3 == 2 ? prompt[size_t(i) % prompt.size()] : id(rng_));
        output.push_back(output[0]);  // repeats, for the frequency penalty
        output.push_back(output[0]);
        const int32_t top = int32_t(std::max_element(logits, logits + vocab) - logits);
        auto allow_few = [&] {
            mask.assign(size_t(vocab + 31) / 32, 0u);
            for (int i = 0; i < 5; ++i) {
                const int32_t t = id(rng_);
                mask[size_t(t) / 32] |= 1u << (t % 32);
            }
        };
        auto penalise = [&] {
            p.repetition_penalty = 1.3f;
            p.presence_penalty = 0.5f;
            p.frequency_penalty = 0.4f;
        };
        auto bias = [&] {
            p.logit_bias = {{id(rng_), 5.0f}, {id(rng_), -3.0f}, {top, -1.5f}, {id(rng_), 1.5f}};
            const int32_t twice = id(rng_);
            p.logit_bias.push_back({twice, 1.5f});
            p.logit_bias.push_back({twice, 2.25f});  // one id twice: added one after the other
        };
        switch (r % 16) {
            case 0: p.temperature = 0.0f; break;                    // greedy
            case 1: p.temperature = 1.0f; break;                    // the whole vocabulary sorted
            case 2: p.temperature = 0.8f, p.top_k = 40; break;
            case 3: p.temperature = 1.1f, p.top_p = 0.9f; break;
            case 4: p.temperature = 1.0f, p.min_p = 0.1f; break;
            case 5: p.temperature = 0.7f, p.top_k = 100, p.top_p = 0.95f, p.min_p = 0.02f; break;
            case 6: p.temperature = 1.0f, penalise(); break;
            case 7: p.temperature = 0.0f, penalise(); break;
            case 8: p.temperature = 0.9f, bias(); break;
            case 9: p.temperature = 1.0f, p.top_k = 5, suppressed = {top, id(rng_), id(rng_)}; break;
            case 10: p.temperature = 1.0f, allow_few(); break;
            case 11: p.temperature = 0.0f, allow_few(), bias(); break;
            case 12: p.temperature = 0.01f; break;
            case 13: p.temperature = 1.0f, p.top_p = 1e-6f; break;
            case 14: p.temperature = 1.0f, p.top_k = r % 32 == 14 ? 1 : 1 << 30; break;
            default:  // everything at once
                p.temperature = 0.9f, p.top_k = 50, p.top_p = 0.9f, p.min_p = 0.05f;
                penalise();
                bias();
                suppressed = {top};
                if (r % 32 == 31) allow_few();
        }
        p.validate(vocab);
    }

    std::vector<float> randn(size_t n, float scale = 1.0f) {
        std::vector<float> v(n);
        for (float& x : v) x = scale * normal_(rng_);
        return v;
    }
    std::vector<float> randu(size_t n, float lo, float hi) {
        std::uniform_real_distribution<float> d(lo, hi);
        std::vector<float> v(n);
        for (float& x : v) x = d(rng_);
        return v;
    }

    template <class... Args>
    static std::string fmt(const char* f, Args... args) {
        char buf[256];
        std::snprintf(buf, sizeof buf, f, args...);
        return buf;
    }

    Backend& cpu_;
    Backend& gpu_;
    std::string filter_;
    std::mt19937 rng_;
    std::normal_distribution<float> normal_{0.0f, 1.0f};
};

std::optional<cuda::QType> bench_qtype(GGMLType t) {
    switch (t) {
        case GGMLType::Q8_0: return cuda::QType::Q8_0;
        case GGMLType::Q4_0: return cuda::QType::Q4_0;
        case GGMLType::Q4_K: return cuda::QType::Q4_K;
        case GGMLType::Q5_K: return cuda::QType::Q5_K;
        case GGMLType::Q6_K: return cuda::QType::Q6_K;
        default: return std::nullopt;
    }
}

// Seconds a launch, the mean of `iters` after one warm-up (which also makes
// any one-time choice, such as a GEMM's algorithm), the whole device drained
// before and after: launch(i) may cycle through copies of its weights, and
// the backend's launches run on its own stream.
template <class Launch>
double seconds_per_launch(Launch&& launch, int iters = 50) {
    launch(0);
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) launch(i);
    cudaDeviceSynchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

// Dense bf16 and quantized matrices on Llama-3-8B's shapes. Random bytes make
// valid blocks as far as timing goes (a NaN scale costs the same).
void bench_matmul(Backend& gpu) {
    struct Mat {
        const char* name;
        int32_t n, k;
    };
    const Mat mats[] = {{"q/o", 4096, 4096}, {"gate/up", 14336, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
    const GGMLType types[] = {GGMLType::BF16, GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0, GGMLType::Q5_K,
                              GGMLType::Q4_0};
    std::mt19937 rng(1);
    for (GGMLType type : types)
        for (const Mat& m : mats) {
            const size_t bytes = size_t(m.n) * ggml_row_bytes(type, m.k);
            const auto q = bench_qtype(type);  // the device's blocks may be larger (Q6_K's padded)
            const size_t device_bytes = q ? size_t(m.n) * (m.k / cuda::quant_block_elems(*q)) * cuda::quant_block_bytes(*q)
                                          : bytes;
            std::vector<uint32_t> raw((std::max(bytes, device_bytes) + 3) / 4);
            for (uint32_t& v : raw) v = rng() & 0x3bff3bffu;  // keep f16 fields finite
            // Copies enough to cycle through 4x the L2 (60 MB on an H200), so that weights come from memory.
            std::vector<std::unique_ptr<PackedWeight>> ws;
            for (size_t total = 0; ws.empty() || total < (size_t(240) << 20); total += bytes)
                ws.push_back(gpu.pack_weight({"w", type, m.n, m.k, reinterpret_cast<const uint8_t*>(raw.data())}));
            DeviceArena g(gpu);
            std::vector<float> xh(size_t(512) * m.k, 0.01f);
            const float* x = g.copy(xh);
            float* out = g.poisoned(size_t(512) * m.n);
            for (int32_t rows : {1, 2, 5, 8, 16, 64, 512}) {  // 2 to 16: speculative verification's 1 + k
                const double s = seconds_per_launch(
                    [&](int i) { gpu.matmul(x, *ws[size_t(i) % ws.size()], nullptr, rows, out); }, rows == 512 ? 5 : 50);
                if (rows == 512)
                    std::printf("bench %-5s %-8s n=%-6d k=%-5d rows=%-3d %9.1f us  %7.1f TFLOP/s\n", ggml_type_name(type),
                                m.name, m.n, m.k, rows, s * 1e6, 2.0 * rows * m.n * m.k / s / 1e12);
                else if (rows == 64)
                    std::printf("bench %-5s %-8s n=%-6d k=%-5d rows=%-3d %9.1f us  %7.1f GB/s of weights  %5.1f%% of 4.19 TB/s  %7.1f TFLOP/s\n",
                                ggml_type_name(type), m.name, m.n, m.k, rows, s * 1e6, bytes / s / 1e9,
                                100.0 * bytes / s / 4.19e12, 2.0 * rows * m.n * m.k / s / 1e12);
                else
                    std::printf("bench %-5s %-8s n=%-6d k=%-5d rows=%-3d %9.1f us  %7.1f GB/s of weights  %5.1f%% of 4.19 TB/s\n",
                                ggml_type_name(type), m.name, m.n, m.k, rows, s * 1e6, bytes / s / 1e9,
                                100.0 * bytes / s / 4.19e12);
                std::fflush(stdout);
            }
            if (q) {  // the widening alone, both versions
                void* wide = gpu.alloc(size_t(m.n) * m.k * 2);
                std::vector<void*> blocks;
                for (size_t total = 0; blocks.empty() || total < (size_t(240) << 20); total += device_bytes) {
                    blocks.push_back(gpu.alloc((device_bytes + 15) / 16 * 16));
                    gpu.upload(blocks.back(), raw.data(), device_bytes);
                }
                for (int version : {1, 2}) {
                    const double sec = seconds_per_launch(
                        [&](int i) {
                            (version == 1 ? cuda::launch_quant_to_bf16_v1 : cuda::launch_quant_to_bf16)(
                                *q, blocks[size_t(i) % blocks.size()], m.n, m.k, m.k, wide, nullptr);
                        },
                        20);
                    const double moved = double(bytes) + 2.0 * m.n * m.k;  // blocks read, bf16 written
                    std::printf("bench widen %-5s %-8s n=%-6d k=%-5d version %d %9.1f us  %7.1f GB/s moved  %5.1f%% of 4.19 TB/s\n",
                                ggml_type_name(type), m.name, m.n, m.k, version, sec * 1e6, moved / sec / 1e9,
                                100.0 * moved / sec / 4.19e12);
                    std::fflush(stdout);
                }
                for (void* b : blocks) gpu.free(b);
                gpu.free(wide);
            }
        }
}

// Llama-3-8B's matrices as the decode GEMVs see them (q/k/v and gate/up also
// as the one launch matmul_shared_input makes of them), and Llama-3.2-1B's,
// whose rows of 2,048 are as short in bytes as an FP8 row of 4,096.
struct GemvShape {
    const char* name;
    int32_t n, k;
};
constexpr GemvShape kGemvShapes[] = {
    {"k/v", 1024, 4096},       {"q/o", 4096, 4096},     {"qkv", 6144, 4096},         {"gate/up", 14336, 4096},
    {"gate+up", 28672, 4096},  {"down", 4096, 14336},   {"lm_head", 128256, 4096},   {"1b q/o", 2048, 2048},
    {"1b qkv", 3072, 2048},    {"1b gate+up", 16384, 2048}, {"1b down", 2048, 8192}};

// The BF16 GEMV's tilings (features a warp x words in flight a feature) on
// Llama-3-8B's shapes and q/k/v as one matrix, in GB/s of weights: at one row
// the numbers Tiling<Bf16Format, 1> is chosen by; at 2 to 5 rows (speculative
// verification's 1 + k) beside what Backend::matmul does with those rows
// (cuBLASLt above kDenseGemvMaxRows), the numbers that threshold is chosen by.
void bench_gemv_variants(Backend& gpu) {
    const std::tuple<int, int, bool> one_row[] = {{1, 2, false}, {1, 4, false}, {1, 8, false}, {2, 2, false},
                                                  {2, 4, false}, {2, 8, false}, {4, 2, false}, {4, 4, false},
                                                  {1, 2, true},  {2, 1, true},  {2, 2, true},  {4, 1, true}};
    const std::tuple<int, int, bool> more_rows[] = {{2, 2, false}, {4, 1, false}, {4, 2, false}, {8, 1, false}};
    std::mt19937 rng(3);
    for (const GemvShape& m : kGemvShapes) {
        const size_t bytes = size_t(m.n) * m.k * 2;
        // Enough copies to cycle through 4x the L2, so that the weights come from memory.
        std::vector<uint16_t> host(size_t(m.n) * m.k);
        for (uint16_t& h : host) h = uint16_t(0x3c00 | (rng() & 0x3ff));  // finite bf16, about 0.01
        std::vector<void*> ws;  // for the GEMV itself
        std::vector<std::unique_ptr<PackedWeight>> packed;  // for Backend::matmul
        for (size_t total = 0; ws.empty() || total < (size_t(240) << 20); total += bytes) {
            ws.push_back(gpu.alloc(bytes));
            gpu.upload(ws.back(), host.data(), bytes);
            packed.push_back(
                gpu.pack_weight({"w", GGMLType::BF16, m.n, m.k, reinterpret_cast<const uint8_t*>(host.data())}));
        }
        DeviceArena g(gpu);
        const float* x = g.copy(std::vector<float>(size_t(5) * m.k, 0.01f));
        float* out = g.poisoned(size_t(5) * m.n);
        auto report = [&](int rows, const char* what, double sec) {
            std::printf("bench gemv bf16 %-10s n=%-6d k=%-5d rows=%d %-32s %8.1f us  %7.1f GB/s  %5.1f%% of 4.19 TB/s\n",
                        m.name, m.n, m.k, rows, what, sec * 1e6, bytes / sec / 1e9, 100.0 * bytes / sec / 4.19e12);
            std::fflush(stdout);
        };
        for (int rows = 1; rows <= 5; ++rows) {
            using Variants = std::span<const std::tuple<int, int, bool>>;
            for (auto [features, unroll, prefetch] : rows == 1 ? Variants(one_row) : Variants(more_rows)) {
                const double sec = seconds_per_launch([&](int i) {
                    cuda::launch_bf16_gemv_variant(rows, features, unroll, prefetch, x, m.k, ws[size_t(i) % ws.size()],
                                                   m.k, m.n, out, nullptr);
                });
                char what[48];
                std::snprintf(what, sizeof what, "features=%d unroll=%d%s", features, unroll, prefetch ? " prefetch" : "");
                report(rows, what, sec);
            }
            // The backend runs on its own stream: seconds_per_launch drains the whole device.
            report(rows, "Backend::matmul",
                   seconds_per_launch([&](int i) { gpu.matmul(x, *packed[size_t(i) % packed.size()], nullptr, rows, out); }));
        }
        for (void* w : ws) gpu.free(w);
    }
}

// The one-row FP8 GEMV's tilings on the same shapes, in GB/s of weights (1 byte
// each). A lane sums its words in the same order in every tiling, so each
// variant's output must equal the production tiling's bit for bit: a variant
// that differs is reported as a FAIL (and the run exits non-zero).
bool bench_fp8_gemv_variants(Backend& gpu) {
    const std::tuple<int, int, bool> variants[] = {{1, 8, false}, {2, 2, false}, {2, 4, false}, {4, 2, false},
                                                   {4, 4, false}, {8, 1, false}, {8, 2, false}, {1, 4, true},
                                                   {2, 2, true},  {2, 4, true},  {4, 1, true},  {4, 2, true},
                                                   {8, 1, true}};
    std::mt19937 rng(5);
    bool ok = true;
    for (const GemvShape& m : kGemvShapes) {
        const size_t bytes = size_t(m.n) * m.k;
        std::vector<uint8_t> host(bytes);
        for (uint8_t& b : host) b = uint8_t(rng() & 0xf7u);  // E4M3 without NaN (exponent below 15)
        std::vector<uint8_t*> ws;
        for (size_t total = 0; ws.empty() || total < (size_t(240) << 20); total += bytes) {
            ws.push_back(static_cast<uint8_t*>(gpu.alloc(bytes)));
            gpu.upload(ws.back(), host.data(), bytes);
        }
        DeviceArena g(gpu);
        std::vector<float> xh(size_t(m.k));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& v : xh) v = normal(rng);
        const float* x = g.copy(xh);
        const float* scale = g.copy(std::vector<float>{0.0123f});
        float* out = g.poisoned(size_t(m.n));
        float* ref = g.poisoned(size_t(m.n));
        cuda::launch_fp8_gemv(x, 1, m.k, ws[0], scale, m.n, ref, nullptr);
        std::vector<float> want(size_t(m.n)), got(size_t(m.n));
        cudaDeviceSynchronize();
        gpu.download(want.data(), ref, want.size() * sizeof(float));
        auto report = [&](const char* what, double sec, const char* check) {
            std::printf("bench gemv fp8 %-10s n=%-6d k=%-5d rows=1 %-32s %8.1f us  %7.1f GB/s  %5.1f%% of 4.19 TB/s  %s\n",
                        m.name, m.n, m.k, what, sec * 1e6, bytes / sec / 1e9, 100.0 * bytes / sec / 4.19e12, check);
            std::fflush(stdout);
        };
        report("production", seconds_per_launch([&](int i) {
                   cuda::launch_fp8_gemv(x, 1, m.k, ws[size_t(i) % ws.size()], scale, m.n, out, nullptr);
               }),
               "");
        for (auto [features, unroll, prefetch] : variants) {
            // Every copy holds the same bytes, so what the timed launches leave in
            // out is the variant's result; NaNs first, so that an unwritten one fails.
            cudaMemset(out, 0xff, got.size() * sizeof(float));
            const double sec = seconds_per_launch([&](int i) {
                cuda::launch_fp8_gemv_variant(features, unroll, prefetch, x, m.k, ws[size_t(i) % ws.size()], scale,
                                              m.n, out, nullptr);
            });
            gpu.download(got.data(), out, got.size() * sizeof(float));
            const bool same = std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
            ok = ok && same;
            char what[48];
            std::snprintf(what, sizeof what, "features=%d unroll=%d%s", features, unroll, prefetch ? " prefetch" : "");
            report(what, sec, same ? "same" : "FAIL: differs from production");
        }
        for (uint8_t* w : ws) gpu.free(w);
    }
    return ok;
}

// Paged attention on Llama-3-8B's heads (32 q, 8 kv, hd 128), block size 16:
// decode in GB/s of K/V read (and the fraction of the H200's 4.19 TB/s), and
// a causal 512-row prefill in TFLOP/s. The pool holds uninitialised memory
// (timing only).
void bench_attention(Backend& gpu) {
    const int32_t nh = 32, nkv = 8, hd = 128, bs = 16;
    const AttentionParams attn{nh, nkv, hd, 1.0f / std::sqrt(float(hd)), 0};
    std::mt19937 rng(2);
    auto time_step = [&](const std::vector<Seq>& seqs, int iters, KVDType dtype) {
        const int32_t num_blocks = blocks_needed(seqs, bs);
        const StepPlan plan = make_plan(rng, seqs, bs, num_blocks, 1000);
        gpu.set_step(plan, bs);
        const KVCacheShape cs{1, num_blocks, bs, nkv, hd, dtype};
        const size_t pool_bytes = cs.bytes_per_layer();
        void* k = gpu.alloc(pool_bytes);
        void* v = gpu.alloc(pool_bytes);
        DeviceArena g(gpu);
        std::vector<float> qh(size_t(plan.num_tokens()) * nh * hd, 0.01f);
        const float* q = g.copy(qh);
        float* out = g.poisoned(qh.size());
        KVCache cache{cs, {k}, {v}};
        // The warm-up also sizes the decode kernel's workspace.
        const double s = seconds_per_launch([&](int) { gpu.paged_attention(q, attn, cache, 0, out); }, iters);
        gpu.free(k);
        gpu.free(v);
        return s;
    };
    for (KVDType dtype : {KVDType::F32, KVDType::BF16})
        for (int32_t ctx : {512, 4096, 32768})
            for (int32_t rows : {1, 8, 64}) {
                const std::vector<Seq> seqs(size_t(rows), Seq{1, ctx});
                const double s = time_step(seqs, 50, dtype);
                const double bytes = 2.0 * ctx * nkv * hd * double(kv_dtype_bytes(dtype)) * rows;
                std::printf("bench attention decode %-8s heads=%d/%d hd=%d ctx=%-6d rows=%-3d %9.1f us  %7.1f GB/s of KV  "
                            "%5.1f%% of 4.19 TB/s\n",
                            kv_dtype_name(dtype), nh, nkv, hd, ctx, rows, s * 1e6, bytes / s / 1e9,
                            100.0 * bytes / s / 4.19e12);
                std::fflush(stdout);
            }
    for (KVDType dtype : {KVDType::F32, KVDType::BF16})
        for (int32_t n : {512, 2048}) {
            const double s = time_step({Seq{n, n}}, 20, dtype);
            const double flops = 4.0 * n * n * hd * nh / 2;
            std::printf("bench attention prefill %-8s heads=%d/%d hd=%d rows=%d ctx=%d %9.1f us  %7.2f TFLOP/s (causal)\n",
                        kv_dtype_name(dtype), nh, nkv, hd, n, n, s * 1e6, flops / s / 1e12);
            std::fflush(stdout);
        }
}

}  // namespace

int main(int argc, char** argv) {
    std::string filter;
    uint32_t seed = 1234;
    bool bench = false, bench_attention_only = false, bench_matmul_only = false, bench_gemv_only = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--bench") {
            bench = true;
        } else if (a == "--bench-attention") {
            bench_attention_only = true;
        } else if (a == "--bench-gemv") {
            bench_gemv_only = true;
        } else if (a == "--bench-matmul") {
            bench_matmul_only = true;

        } else if (a == "--filter" && i + 1 < argc) {
            filter = argv[++i];
        } else if (a == "--seed" && i + 1 < argc) {
            seed = uint32_t(std::stoul(argv[++i]));
        } else {
            std::fprintf(stderr, "usage: %s [--filter SUBSTRING] [--seed N] [--bench | --bench-attention | --bench-matmul | --bench-gemv]\n", argv[0]);
            return 2;
        }
    }
    if (!minfer::gpu_test::cuda_device_answers("minfer_gpu_ops")) return minfer::gpu_test::kSkipNoGpu;
    try {
        std::printf("minfer_gpu_ops: %s; seed %u\n", cuda_device_summary().c_str(), seed);
        auto cpu = make_cpu_backend();
        auto gpu = make_cuda_backend(cuda_device_for(World{}));
        BackendOptions fp8_options;
        fp8_options.quantization = WeightQuantization::FP8;
        auto gpu8 = make_cuda_backend(0, fp8_options);
        if (bench_attention_only) {
            bench_attention(*gpu);
            return 0;
        }
        if (bench_gemv_only) {
            bench_gemv_variants(*gpu);
            return bench_fp8_gemv_variants(*gpu) ? 0 : 1;
        }
        if (bench_matmul_only) {
            bench_matmul(*gpu);
            return 0;
        }
        if (bench) {
            bench_gemv_variants(*gpu);
            if (!bench_fp8_gemv_variants(*gpu)) return 1;
            bench_attention(*gpu);
            bench_matmul(*gpu);
            return 0;
        }
        OpTests t(*cpu, *gpu, filter, seed);
        t.embedding();
        t.add_rms_norm();
        t.rope_kv_write();
        t.paged_attention();
        t.matmul();
        t.matmul_shared();
        t.matmul_shards();
        t.bf16_copy();
        t.attention_int8_copy();
        t.kv_blocks_io();
        t.swiglu();
        t.geglu();
        t.moe_route();
        t.moe_experts();
        t.add_sigmoid_gated();
        t.scale();
        t.gather_logit_rows();
        t.sample();
        t.sample_mixed();
        t.sample_drafts();
        t.sample_masked();
        t.fp8(*gpu8);
        std::printf("%d passed, %d failed\n", t.passed, t.failed);
        return t.failed ? 1 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "minfer_gpu_ops: %s\n", e.what());
        return 2;
    }
}
