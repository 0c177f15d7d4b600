// The CPU backend's ops against direct computations written independently.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <complex>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/formats/float16.h"
#include "../rel_error.h"

using namespace minfer;

namespace {

std::vector<float> random_vector(std::mt19937& rng, size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

using minfer::test::rel_error;

// One sequence per entry of `query_lens`/`context_lens`, each with blocks taken
// in a random order from the pool, so block tables are scattered.
StepPlan random_plan(std::mt19937& rng, const std::vector<int32_t>& query_lens, const std::vector<int32_t>& context_lens,
                     int32_t block_size, int32_t num_blocks) {
    StepPlan p;
    std::vector<int32_t> pool(num_blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    int32_t max_blocks = 0;
    for (int32_t c : context_lens) max_blocks = std::max(max_blocks, (c + block_size - 1) / block_size);
    p.max_blocks_per_seq = max_blocks;
    p.query_start = {0};
    size_t next_block = 0;
    for (size_t s = 0; s < query_lens.size(); ++s) {
        std::vector<int32_t> table(max_blocks, -1);
        for (int32_t b = 0; b < (context_lens[s] + block_size - 1) / block_size; ++b) table[b] = pool.at(next_block++);
        p.block_tables.insert(p.block_tables.end(), table.begin(), table.end());
        for (int32_t pos = context_lens[s] - query_lens[s]; pos < context_lens[s]; ++pos) {
            p.token_ids.push_back(0);
            p.positions.push_back(pos);
            p.slot_mapping.push_back(table[pos / block_size] * block_size + pos % block_size);
        }
        p.query_start.push_back(static_cast<int32_t>(p.token_ids.size()));
        p.context_lens.push_back(context_lens[s]);
    }
    return p;
}

}  // namespace

TEST_CASE("float16 and bfloat16 conversions round-trip every finite half") {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint16_t x = static_cast<uint16_t>(h);
        const float f = fp16_to_f32(x);
        if (std::isnan(f)) continue;
        CHECK_MESSAGE(f32_to_fp16(f) == x, "half 0x" << std::hex << h);
    }
    CHECK(fp16_to_f32(0x3c00) == 1.0f);
    CHECK(fp16_to_f32(0xc000) == -2.0f);
    CHECK(fp16_to_f32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // a tie rounds to even
    CHECK(f32_to_fp16(70000.0f) == 0x7c00);
    CHECK(bf16_to_f32(f32_to_bf16(3.140625f)) == 3.140625f);
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // tie to even
}

TEST_CASE("RoPE, NORM and NEOX, against complex rotations; K and V land in their slots") {
    std::mt19937 rng(1);
    auto backend = make_cpu_backend();
    const int32_t block_size = 4, num_blocks = 8;
    for (bool neox : {false, true}) {
        for (int32_t n_rot : {8, 6}) {  // 6 < head_dim: the last dims pass through
            CAPTURE(neox);
            CAPTURE(n_rot);
            const AttentionParams a{4, 2, 8, 1.0f, 0};
            std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};
            RopeParams rope{n_rot, 500.0f, neox, 0.5f, n_rot == 8 ? factors.data() : nullptr};
            StepPlan plan = random_plan(rng, {3, 2}, {5, 9}, block_size, num_blocks);
            const int32_t n = plan.num_tokens();
            auto q = random_vector(rng, size_t(n) * a.n_heads * a.head_dim);
            auto k = random_vector(rng, size_t(n) * a.n_kv_heads * a.head_dim);
            auto v = random_vector(rng, size_t(n) * a.n_kv_heads * a.head_dim);
            const auto q0 = q;
            KVCache cache;
            cache.shape = {1, num_blocks, block_size, a.n_kv_heads, a.head_dim};
            std::vector<float> kpool(cache.shape.elems_per_block() * num_blocks, NAN), vpool = kpool;
            cache.k = {kpool.data()};
            cache.v = {vpool.data()};
            backend->set_step(plan, block_size);
            backend->rope_kv_write(q.data(), k.data(), v.data(), a, rope, cache, 0);
            // The same write into a bf16 pool: the float pool's values, rounded once.
            KVCache cache16 = cache;
            cache16.shape.dtype = KVDType::BF16;
            std::vector<uint16_t> kpool16(cache.shape.elems_per_block() * num_blocks, 0xffff), vpool16 = kpool16;
            cache16.k = {kpool16.data()};
            cache16.v = {vpool16.data()};
            std::vector<float> q16 = q0;
            backend->rope_kv_write(q16.data(), k.data(), v.data(), a, rope, cache16, 0);
            CHECK(q16 == q);
            int32_t rounded_once = 0, written = 0;
            for (size_t i = 0; i < kpool.size(); ++i) {
                if (std::isnan(kpool[i])) continue;  // a slot this step did not write
                ++written;
                rounded_once += kpool16[i] == f32_to_bf16(kpool[i]) && vpool16[i] == f32_to_bf16(vpool[i]);
            }
            CHECK(written == n * a.n_kv_heads * a.head_dim);
            CHECK(rounded_once == written);

            auto rotated = [&](const float* x, int32_t pos, int32_t d) -> double {
                const int32_t half = n_rot / 2;
                if (d >= n_rot) return x[d];
                const int32_t i = neox ? d % half : d / 2;
                const int32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
                double theta = std::pow(500.0, -2.0 * i / n_rot) * (pos * 0.5);
                if (rope.freq_factors) theta /= factors[i];
                const std::complex<double> z = std::complex<double>(x[i0], x[i1]) * std::polar(1.0, theta);
                return d == i0 ? z.real() : z.imag();
            };
            std::vector<double> q_ref(q.size()), k_ref, v_ref;
            std::vector<float> k_got, v_got;
            for (int32_t r = 0; r < n; ++r) {
                for (int32_t h = 0; h < a.n_heads; ++h)
                    for (int32_t d = 0; d < a.head_dim; ++d)
                        q_ref[(r * a.n_heads + h) * a.head_dim + d] =
                            rotated(&q0[(r * a.n_heads + h) * a.head_dim], plan.positions[r], d);
                const int32_t slot = plan.slot_mapping[r];
                for (int32_t h = 0; h < a.n_kv_heads; ++h)
                    for (int32_t d = 0; d < a.head_dim; ++d) {
                        const size_t src = (r * a.n_kv_heads + h) * a.head_dim;
                        k_ref.push_back(rotated(&k[src], plan.positions[r], d));
                        v_ref.push_back(v[src + d]);
                        k_got.push_back(kpool[(size_t(slot) * a.n_kv_heads + h) * a.head_dim + d]);
                        v_got.push_back(vpool[(size_t(slot) * a.n_kv_heads + h) * a.head_dim + d]);
                    }
            }
            CHECK(rel_error(q, q_ref) < 1e-6);
            CHECK(rel_error(k_got, k_ref) < 1e-6);
            CHECK(rel_error(v_got, v_ref) == 0.0);
        }
    }
}

// Batch invariance of RoPE: each row of a step of 96, rotated by a two-thread
// pool (rows split between the threads), against the same row alone in a step
// of its own on one thread, bit for bit. Head sizes of 8 and 6 floats put the
// heads at every 8-byte alignment; a compiler left to contract the rotation's
// multiply-adds did it one way in a vectorized loop's body and the other in
// its peeled prologue, which broke this on AMD Zen 4.
TEST_CASE("RoPE: a row's bits do not depend on the step's other rows or on the thread that rotates it") {
    std::mt19937 rng(3);
    auto two = make_cpu_backend(2), one = make_cpu_backend(1);
    const int32_t block_size = 16, num_blocks = 8, n = 96;
    for (int32_t hd : {8, 6, 64})
        for (bool neox : {false, true}) {
            CAPTURE(hd);
            CAPTURE(neox);
            const AttentionParams a{32, 32, hd, 1.0f, 0};  // rows (32 + 32) * hd wide: the pool splits 96 of them
            const RopeParams rope{hd, 10000.0f, neox, 1.0f, nullptr};
            const StepPlan plan = random_plan(rng, {n}, {n}, block_size, num_blocks);
            const int64_t q_row = int64_t(a.n_heads) * hd, kv_row = int64_t(a.n_kv_heads) * hd;
            const auto q0 = random_vector(rng, size_t(n * q_row));
            const auto k = random_vector(rng, size_t(n * kv_row)), v = random_vector(rng, size_t(n * kv_row));
            KVCache cache;
            cache.shape = {1, num_blocks, block_size, a.n_kv_heads, hd};
            std::vector<float> kpool(cache.shape.elems_per_block() * num_blocks), vpool = kpool;
            cache.k = {kpool.data()};
            cache.v = {vpool.data()};
            std::vector<float> q = q0;
            two->set_step(plan, block_size);
            two->rope_kv_write(q.data(), k.data(), v.data(), a, rope, cache, 0);

            int32_t differ = 0;
            for (int32_t r = 0; r < n; ++r) {
                StepPlan alone;
                alone.token_ids = {0};
                alone.positions = {plan.positions[r]};
                alone.slot_mapping = {plan.slot_mapping[r]};
                alone.query_start = {0, 1};
                alone.context_lens = {plan.positions[r] + 1};
                alone.block_tables = plan.block_tables;
                alone.max_blocks_per_seq = plan.max_blocks_per_seq;
                std::vector<float> q1(q0.begin() + r * q_row, q0.begin() + (r + 1) * q_row);
                std::vector<float> k1pool(kpool.size()), v1pool(kpool.size());
                KVCache c1 = cache;
                c1.k = {k1pool.data()};
                c1.v = {v1pool.data()};
                one->set_step(alone, block_size);
                one->rope_kv_write(q1.data(), k.data() + r * kv_row, v.data() + r * kv_row, a, rope, c1, 0);
                const int64_t slot = plan.slot_mapping[r];
                differ += std::memcmp(q1.data(), q.data() + r * q_row, q_row * sizeof(float)) != 0 ||
                          std::memcmp(k1pool.data() + slot * kv_row, kpool.data() + slot * kv_row,
                                      kv_row * sizeof(float)) != 0;
            }
            CHECK(differ == 0);
        }
}

TEST_CASE("paged attention equals dense causal attention over scattered block tables") {
    std::mt19937 rng(2);
    auto backend = make_cpu_backend();
    struct Case {
        std::vector<int32_t> query_lens, context_lens;
        int32_t n_heads, n_kv_heads, head_dim, block_size, window;
    };
    const Case cases[] = {
        {{1}, {1}, 2, 2, 4, 4, 0},                       // first token
        {{1, 1, 1}, {7, 16, 33}, 8, 2, 16, 16, 0},        // decode, GQA 4:1, block boundaries
        {{5, 1, 9}, {5, 12, 20}, 4, 4, 8, 4, 0},          // prefill, decode and a chunk together
        {{6, 3}, {30, 3}, 6, 3, 8, 8, 5},                 // sliding window
        {{4}, {100}, 4, 1, 32, 16, 0},                    // MQA, long context
    };
    for (const Case& c : cases)
        for (KVDType dtype : {KVDType::F32, KVDType::BF16}) {
            CAPTURE(kv_dtype_name(dtype));
            const int32_t num_blocks = 40;
            StepPlan plan = random_plan(rng, c.query_lens, c.context_lens, c.block_size, num_blocks);
            const int32_t n = plan.num_tokens();
            const AttentionParams a{c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(float(c.head_dim)), c.window};
            KVCache cache;
            cache.shape = {1, num_blocks, c.block_size, c.n_kv_heads, c.head_dim, dtype};
            auto kpool = random_vector(rng, cache.shape.elems_per_block() * num_blocks);
            auto vpool = random_vector(rng, cache.shape.elems_per_block() * num_blocks);
            // A bf16 pool holds the values rounded; the reference reads those (kpool, vpool widened back).
            std::vector<uint16_t> kpool16, vpool16;
            for (size_t i = 0; i < kpool.size(); ++i) {
                kpool16.push_back(f32_to_bf16(kpool[i]));
                vpool16.push_back(f32_to_bf16(vpool[i]));
                if (dtype == KVDType::BF16) kpool[i] = bf16_to_f32(kpool16[i]), vpool[i] = bf16_to_f32(vpool16[i]);
            }
            cache.k = {dtype == KVDType::BF16 ? static_cast<void*>(kpool16.data()) : kpool.data()};
            cache.v = {dtype == KVDType::BF16 ? static_cast<void*>(vpool16.data()) : vpool.data()};
            auto q = random_vector(rng, size_t(n) * c.n_heads * c.head_dim);
            std::vector<float> out(q.size(), NAN);
            backend->set_step(plan, c.block_size);
            backend->paged_attention(q.data(), a, cache, 0, out.data());

            // Dense reference: gather each sequence's K/V into a contiguous array first.
            std::vector<double> ref(out.size());
            for (int32_t s = 0; s < plan.num_seqs(); ++s) {
                const int32_t ctx = plan.context_lens[s];
                auto at = [&](const std::vector<float>& pool, int32_t t, int32_t h, int32_t d) {
                    const int32_t blk = plan.block_tables[s * plan.max_blocks_per_seq + t / c.block_size];
                    return double(pool[((size_t(blk) * c.block_size + t % c.block_size) * c.n_kv_heads + h) * c.head_dim + d]);
                };
                for (int32_t r = plan.query_start[s]; r < plan.query_start[s + 1]; ++r) {
                    const int32_t pos = ctx - (plan.query_start[s + 1] - r);
                    for (int32_t h = 0; h < c.n_heads; ++h) {
                        const int32_t kvh = h * c.n_kv_heads / c.n_heads;
                        std::vector<double> w;
                        const int32_t first = c.window ? std::max(0, pos - c.window + 1) : 0;
                        for (int32_t t = first; t <= pos; ++t) {
                            double dot = 0;
                            for (int32_t d = 0; d < c.head_dim; ++d)
                                dot += q[(size_t(r) * c.n_heads + h) * c.head_dim + d] * at(kpool, t, kvh, d);
                            w.push_back(dot / std::sqrt(double(c.head_dim)));
                        }
                        const double mx = *std::max_element(w.begin(), w.end());
                        double total = 0;
                        for (auto& x : w) total += (x = std::exp(x - mx));
                        for (int32_t d = 0; d < c.head_dim; ++d) {
                            double acc = 0;
                            for (int32_t t = first; t <= pos; ++t) acc += w[t - first] / total * at(vpool, t, kvh, d);
                            ref[(size_t(r) * c.n_heads + h) * c.head_dim + d] = acc;
                        }
                    }
                }
            }
            CHECK(rel_error(out, ref) < 1e-5);
        }
}

TEST_CASE("matmul over F32, F16 and BF16 weights, with bias; RMSNorm with residual; SwiGLU") {
    std::mt19937 rng(3);
    auto backend = make_cpu_backend();
    const int32_t rows = 3, in = 37, out_f = 11;
    auto x = random_vector(rng, size_t(rows) * in);
    auto wf = random_vector(rng, size_t(out_f) * in);
    auto bias = random_vector(rng, out_f);
    std::vector<uint16_t> wh(wf.size()), wb(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) {
        wh[i] = f32_to_fp16(wf[i]);
        wb[i] = f32_to_bf16(wf[i]);
    }
    struct Form {
        GGMLType type;
        const void* data;
        double tol;
        float (*widen)(uint16_t);
    };
    for (const Form& f : {Form{GGMLType::F32, wf.data(), 1e-6, nullptr}, Form{GGMLType::F16, wh.data(), 1e-6, fp16_to_f32},
                          Form{GGMLType::BF16, wb.data(), 1e-6, bf16_to_f32}}) {
        auto w = backend->pack_weight({"w", f.type, out_f, in, static_cast<const uint8_t*>(f.data)});
        std::vector<float> y(size_t(rows) * out_f, NAN);
        backend->matmul(x.data(), *w, bias.data(), rows, y.data());
        std::vector<double> ref(y.size());
        for (int32_t r = 0; r < rows; ++r)
            for (int32_t o = 0; o < out_f; ++o) {
                double acc = bias[o];
                for (int32_t j = 0; j < in; ++j) {
                    const size_t i = size_t(o) * in + j;
                    const double wv = f.widen ? f.widen(f.type == GGMLType::F16 ? wh[i] : wb[i]) : wf[i];
                    acc += wv * x[size_t(r) * in + j];
                }
                ref[size_t(r) * out_f + o] = acc;
            }
        CHECK(rel_error(y, ref) < f.tol);
    }

    auto residual = random_vector(rng, size_t(rows) * in);
    auto delta = random_vector(rng, size_t(rows) * in);
    auto weight = random_vector(rng, in);
    std::vector<double> ref(residual.size()), res_ref(residual.size());
    for (int32_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int32_t j = 0; j < in; ++j) {
            res_ref[r * in + j] = double(residual[r * in + j]) + delta[r * in + j];
            ss += res_ref[r * in + j] * res_ref[r * in + j];
        }
        for (int32_t j = 0; j < in; ++j) ref[r * in + j] = res_ref[r * in + j] / std::sqrt(ss / in + 1e-5) * weight[j];
    }
    std::vector<float> normed(residual.size(), NAN);
    backend->add_rms_norm(residual.data(), delta.data(), weight.data(), 1e-5f, rows, in, normed.data());
    CHECK(rel_error(residual, res_ref) < 1e-7);
    CHECK(rel_error(normed, ref) < 1e-6);

    auto gate = random_vector(rng, 64, 3.0f), up = random_vector(rng, 64);
    std::vector<float> act(64, NAN);
    backend->swiglu(gate.data(), up.data(), 4, 16, act.data());
    std::vector<double> act_ref(64);
    for (int i = 0; i < 64; ++i) act_ref[i] = gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i];
    CHECK(rel_error(act, act_ref) < 1e-6);
}
