// minfer_gpu_ops: every op of the CUDA backend against the CPU reference, in
// the spirit of llama.cpp's test-backend-ops.
//
// Each case draws fresh random inputs (never zeros), poisons the outputs with
// NaN on both backends, runs the op on both and prints
//     op  shape  ||gpu - cpu|| / ||cpu||  threshold  PASS/FAIL
// then "N passed, M failed" alone on a line. The exit code is 1 if any case
// failed, 2 if the run itself could not start.
//
// Usage: minfer_gpu_ops [--filter SUBSTRING] [--seed N] [--bench]
//
// --bench instead times the quantized matmul on Llama-3-8B's shapes: the GEMV
// (1 and 8 rows) in GB/s of weights, and a 512-row prefill (bf16 widening +
// GEMM) in TFLOP/s.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/float16.h"
#include "engine/quant.h"
#include "kernels/cuda/cuda_backend.h"

using namespace minfer;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Thresholds by precision.
constexpr double kF32 = 1e-5;       // fp32 on both sides, different summation orders
constexpr double kF32Gemm = 2e-5;   // fp32 dot products up to 4096 long
constexpr double kF16Gemm = 5e-3;   // activations rounded to fp16 (11-bit mantissa)
constexpr double kBF16Gemm = 1e-2;  // activations rounded to bf16 (8-bit mantissa)
constexpr double kQ8Gemm = 2e-2;    // the CPU twin quantizes activations to int8 per block (llama.cpp's way)

// The quantized types the CUDA backend keeps quantized.
const GGMLType kQuantTypes[] = {GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,
                                GGMLType::Q5_1, GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K};
int64_t block_elems(GGMLType t) { return ggml_type_traits(uint32_t(t))->block_elems; }

double rel_error(const std::vector<float>& out, const std::vector<float>& ref) {
    if (out.size() != ref.size()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        const double d = double(out[i]) - double(ref[i]);
        num += d * d;
        den += double(ref[i]) * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);  // NaN in out gives NaN: a failure
}

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
    }

    void embedding_case(GGMLType type, int32_t vocab, int32_t dim, int32_t n) {
        run("embedding", fmt("%s vocab=%d dim=%d rows=%d", ggml_type_name(type), vocab, dim, n), kF32, [&] {
            const auto bytes = encode(randn(size_t(vocab) * dim), type);
            const WeightView view{"table", type, vocab, dim, bytes.data()};
            auto wc = cpu_.pack_weight(view);
            auto wg = gpu_.pack_weight(view);
            const StepPlan plan = make_plan(rng_, {{n, n}}, 16, (n + 15) / 16, vocab);
            set_step(plan, 16);
            DeviceArena g(gpu_);
            std::vector<float> ref(size_t(n) * dim, kNaN);
            float* out = g.poisoned(ref.size());
            cpu_.embedding(*wc, ref.data());
            gpu_.embedding(*wg, out);
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
                    run("rope_kv_write", shape, kF32, [&] {
                        const int32_t num_blocks = blocks_needed(kind.seqs, bs) + 3;
                        const StepPlan plan = make_plan(rng_, kind.seqs, bs, num_blocks, 1000);
                        set_step(plan, bs);
                        const int32_t n = plan.num_tokens();
                        const AttentionParams attn{nh, nkv, hd, 1.0f / std::sqrt(float(hd)), 0};
                        std::vector<float> q = randn(size_t(n) * nh * hd), k = randn(size_t(n) * nkv * hd),
                                           v = randn(size_t(n) * nkv * hd), ff = randu(n_rot / 2, 1.0f, 8.0f);
                        const KVCacheShape cs{2, num_blocks, bs, nkv, hd};
                        const size_t pool = cs.floats_per_block() * num_blocks;
                        std::vector<std::vector<float>> pools = {randn(pool), randn(pool), randn(pool), randn(pool)};

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
                        for (int p = 0; p < 4; ++p) {
                            const float* dev = p < 2 ? cache_g.k[p] : cache_g.v[p - 2];
                            err = std::max(err, rel_error(g.fetch(dev, pool), pools[p]));
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
                    const std::string shape = fmt("hd=%d heads=%d/%d bs=%d window=%d %s(%s)", hd, nh, nkv, bs, window,
                                                  kind.name, seqs_text(kind.seqs).c_str());
                    run("paged_attention", shape, kF32, [&] {
                        const int32_t num_blocks = blocks_needed(kind.seqs, bs) + 3;
                        const StepPlan plan = make_plan(rng_, kind.seqs, bs, num_blocks, 1000);
                        set_step(plan, bs);
                        const int32_t n = plan.num_tokens();
                        const KVCacheShape cs{2, num_blocks, bs, nkv, hd};
                        const size_t pool = cs.floats_per_block() * num_blocks, kv_row = size_t(nkv) * hd;
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
                        const std::vector<float> nan_layer(pool, kNaN);
                        const std::vector<float> q = randn(size_t(n) * nh * hd);
                        const AttentionParams attn{nh, nkv, hd, 1.0f / std::sqrt(float(hd)), window};

                        DeviceArena g(gpu_);
                        KVCache cache_c{cs, {nullptr, k.data()}, {nullptr, v.data()}};
                        KVCache cache_g{cs, {g.copy(nan_layer), g.copy(k)}, {g.copy(nan_layer), g.copy(v)}};
                        std::vector<float> ref(q.size(), kNaN);
                        float* out = g.poisoned(q.size());
                        cpu_.paged_attention(q.data(), attn, cache_c, 1, ref.data());
                        gpu_.paged_attention(g.copy(q), attn, cache_g, 1, out);
                        return rel_error(g.fetch(out, ref.size()), ref);
                    });
                }
    }

    struct Shape {
        int32_t rows, k, n;
        bool offset;  // x and out one float past an aligned address
    };

    void matmul() {
        const Shape shapes[] = {{1, 64, 64, false},    {7, 33, 65, false},    {13, 100, 37, false},
                                {64, 256, 512, false}, {100, 1000, 37, false}, {1, 4096, 1000, false},
                                {3, 4096, 4096, false}, {512, 512, 512, false}, {5, 64, 64, true}, {7, 33, 65, true},
                                {8, 256, 100, false},   {9, 256, 100, true}};  // the quantized GEMV's last row count, and one past
        const GGMLType types[] = {GGMLType::F32, GGMLType::F16, GGMLType::BF16};
        int i = 0;
        for (GGMLType type : types)
            for (const Shape& s : shapes) {
                const double threshold = type == GGMLType::F32 ? kF32Gemm : type == GGMLType::F16 ? kF16Gemm : kBF16Gemm;
                matmul_case(type, s, i++ % 2 == 1, threshold);
            }
        // Quantized weights, k in whole blocks of B: the GEMV (rows 1..8) on a
        // single block, on tiles of 1024 weights with a partial last one, and
        // past 4 tiles per row (a warp's second and third tile); the bf16 GEMM
        // (rows > 8); odd feature counts.
        for (GGMLType type : kQuantTypes) {
            const int32_t b = int32_t(block_elems(type));
            const Shape qshapes[] = {{8, b, 1, false},     {1, 3 * b, 7, false},      {2, 1024 + b, 33, true},
                                     {3, 4096, 33, false}, {8, 4096, 7, false},       {5, 9216, 7, false},
                                     {1, 256, 4097, false}, {7, 2048 + b, 65, true},  {9, 2 * b, 33, false},
                                     {64, 1024 + b, 7, false}, {200, 4096, 33, false}, {200, b, 1, true}};
            for (const Shape& s : qshapes) matmul_case(type, s, i++ % 2 == 1, kQ8Gemm);
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

    void swiglu() {
        const std::pair<int32_t, int32_t> shapes[] = {{1, 1}, {7, 33}, {3, 172}, {64, 11008}};
        for (auto [rows, dim] : shapes)
            run("swiglu", fmt("rows=%d dim=%d", rows, dim), kF32, [&] {
                const size_t n = size_t(rows) * dim;
                const std::vector<float> gate = randn(n, 3.0f), up = randn(n);
                DeviceArena g(gpu_);
                std::vector<float> ref(n, kNaN);
                float* out = g.poisoned(n);
                cpu_.swiglu(gate.data(), up.data(), rows, dim, ref.data());
                gpu_.swiglu(g.copy(gate), g.copy(up), rows, dim, out);
                return rel_error(g.fetch(out, n), ref);
            });
    }

    void geglu() {
        const std::pair<int32_t, int32_t> shapes[] = {{1, 1}, {7, 33}, {3, 2048}, {64, 6912}};
        for (auto [rows, dim] : shapes)
            run("geglu", fmt("rows=%d dim=%d", rows, dim), kF32, [&] {
                const size_t n = size_t(rows) * dim;
                const std::vector<float> gate = randn(n, 3.0f), up = randn(n);
                DeviceArena g(gpu_);
                std::vector<float> ref(n, kNaN);
                float* out = g.poisoned(n);
                cpu_.geglu(gate.data(), up.data(), rows, dim, ref.data());
                gpu_.geglu(g.copy(gate), g.copy(up), rows, dim, out);
                return rel_error(g.fetch(out, n), ref);
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

// Random bytes make valid blocks as far as timing goes (a NaN scale costs the same).
void bench_quant_matmul(Backend& gpu) {
    struct Mat {
        const char* name;
        int32_t n, k;
    };
    const Mat mats[] = {{"q/o", 4096, 4096}, {"gate/up", 14336, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
    const GGMLType types[] = {GGMLType::Q4_K, GGMLType::Q6_K, GGMLType::Q8_0, GGMLType::Q5_K, GGMLType::Q4_0};
    std::mt19937 rng(1);
    for (GGMLType type : types)
        for (const Mat& m : mats) {
            const size_t bytes = size_t(m.n) * ggml_row_bytes(type, m.k);
            std::vector<uint32_t> raw((bytes + 3) / 4);
            for (uint32_t& v : raw) v = rng() & 0x3bff3bffu;  // keep f16 fields finite
            // Copies enough to cycle through 4x the L2 (60 MB on an H200), so that weights come from memory.
            std::vector<std::unique_ptr<PackedWeight>> ws;
            for (size_t total = 0; ws.empty() || total < (size_t(240) << 20); total += bytes)
                ws.push_back(gpu.pack_weight({"w", type, m.n, m.k, reinterpret_cast<const uint8_t*>(raw.data())}));
            DeviceArena g(gpu);
            std::vector<float> xh(size_t(512) * m.k, 0.01f);
            const float* x = g.copy(xh);
            float* out = g.poisoned(size_t(512) * m.n);
            for (int32_t rows : {1, 8, 512}) {
                const int iters = rows == 512 ? 5 : 50;
                gpu.matmul(x, *ws[0], nullptr, rows, out);  // warm-up (and the GEMM's algorithm choice)
                gpu.synchronize();
                const auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < iters; ++i) gpu.matmul(x, *ws[i % ws.size()], nullptr, rows, out);
                gpu.synchronize();
                const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
                if (rows == 512)
                    std::printf("bench %-5s %-8s n=%-6d k=%-5d rows=%-3d %9.1f us  %7.1f TFLOP/s\n", ggml_type_name(type),
                                m.name, m.n, m.k, rows, s * 1e6, 2.0 * rows * m.n * m.k / s / 1e12);
                else
                    std::printf("bench %-5s %-8s n=%-6d k=%-5d rows=%-3d %9.1f us  %7.1f GB/s of weights\n",
                                ggml_type_name(type), m.name, m.n, m.k, rows, s * 1e6, bytes / s / 1e9);
                std::fflush(stdout);
            }
        }
}

}  // namespace

int main(int argc, char** argv) {
    std::string filter;
    uint32_t seed = 1234;
    bool bench = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--bench") {
            bench = true;
        } else if (a == "--filter" && i + 1 < argc) {
            filter = argv[++i];
        } else if (a == "--seed" && i + 1 < argc) {
            seed = uint32_t(std::stoul(argv[++i]));
        } else {
            std::fprintf(stderr, "usage: %s [--filter SUBSTRING] [--seed N] [--bench]\n", argv[0]);
            return 2;
        }
    }
    try {
        std::printf("minfer_gpu_ops: %s; seed %u\n", cuda_device_summary().c_str(), seed);
        auto cpu = make_cpu_backend();
        auto gpu = make_cuda_backend();
        if (bench) {
            bench_quant_matmul(*gpu);
            return 0;
        }
        OpTests t(*cpu, *gpu, filter, seed);
        t.embedding();
        t.add_rms_norm();
        t.rope_kv_write();
        t.paged_attention();
        t.matmul();
        t.swiglu();
        t.geglu();
        t.scale();
        t.gather_logit_rows();
        t.sample();
        std::printf("%d passed, %d failed\n", t.passed, t.failed);
        return t.failed ? 1 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "minfer_gpu_ops: %s\n", e.what());
        return 2;
    }
}
