// The CPU reference backend: plain loops, float32 activations and accumulators.
// Every other backend is checked against these ops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/formats/float16.h"
#include "kernels/formats/quant.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/thread_pool.h"

namespace minfer {

namespace {

// Weights stay where they are (usually the file mapping): matmul reads them in
// their stored type (kernels/cpu/matmul.h). Q8_0, Q4_0 and Q4_1 are also
// repacked in panels of 16 rows (kernels/cpu/panels.h), which matmul reads
// instead; the embedding still reads the rows.
struct CpuWeight : PackedWeight {
    cpu::MatmulWeight m;
    cpu::PanelMatrix panels;
};

// One CpuWeight an expert, each a slice of the file's 3-D tensor.
struct CpuExperts : PackedExperts {
    std::vector<std::unique_ptr<PackedWeight>> experts;
    std::vector<cpu::MatmulWeight> m;  // experts[e]'s, for cpu::moe_experts
};

class CpuBackend final : public Backend {
public:
    CpuBackend(int threads, bool pads_decode_steps) : pool_(threads), pads_decode_steps_(pads_decode_steps) {}
    bool can_record() const override { return pads_decode_steps_; }
    std::string name() const override { return "cpu"; }

    void* alloc(size_t bytes) override {
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!p) throw std::bad_alloc();
        return p;
    }
    void free(void* p) override { std::free(p); }
    void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width_bytes,
                 size_t rows) override {
        for (size_t r = 0; r < rows; ++r)
            std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch,
                        width_bytes);
    }
    size_t available_memory() const override { return host_available_memory(); }
    size_t total_memory() const override { return host_total_memory(); }

    bool supports_kv_dtype(KVDType) const override { return true; }

    void copy_kv_blocks(KVCache& cache, std::span<const int32_t> pairs) override {
        for_each_kv_block_copy(cache, pairs, [](void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); });
    }

    // A shard is not copied: a row shard starts further into the matrix, a
    // column shard also keeps the parent's row stride (matmul reads rows
    // through MatmulWeight::row_bytes).
    std::unique_ptr<PackedWeight> pack_weight(const WeightView& v, const ShardSpec& shard = {}) override {
        auto w = std::make_unique<CpuWeight>();
        w->name = v.name;
        w->type = v.type;
        if (!cpu::matmul_supports(v.type) || !can_dequantize(v.type))
            throw std::invalid_argument("cpu: weight '" + v.name + "' has type " + ggml_type_name(v.type) +
                                        ", which this backend cannot run");
        const ShardRange r = shard_range(v.type, v.rows, v.cols, shard, v.name.c_str());
        w->rows = r.rows;
        w->cols = r.cols;
        w->m = {v.type, r.rows, r.cols, v.data + r.offset, r.row_stride};
        if (cpu::uses_panels(v.type)) {
            w->panels = cpu::pack_panels(w->m);
            w->m.panels = &w->panels;
        }
        return w;
    }

    bool supports_moe() const override { return true; }

    std::unique_ptr<PackedExperts> pack_experts(const WeightView& all, int32_t n_experts) override {
        auto x = std::make_unique<CpuExperts>();
        set_expert_shape(*x, all, n_experts, name());
        const size_t expert_bytes = ggml_row_bytes(all.type, all.cols) * size_t(x->rows);
        for (int32_t e = 0; e < n_experts; ++e) {
            x->experts.push_back(pack_weight({all.name, all.type, x->rows, x->cols, all.data + e * expert_bytes}));
            x->m.push_back(static_cast<const CpuWeight&>(*x->experts.back()).m);
        }
        return x;
    }

    void moe_route(const float* logits, int32_t rows, const MoeRouting& r, int32_t* ids, float* weights) override {
        cpu::moe_route(logits, rows, r.n_experts, r.k, r.renormalize, ids, weights);
    }

    void moe_experts(const float* x, const int32_t* ids, const float* weights, int32_t rows, int32_t k,
                     const PackedExperts& gate, const PackedExperts& up, const PackedExperts& down,
                     float* out) override {
        const auto m = [](const PackedExperts& p) { return std::span(static_cast<const CpuExperts&>(p).m); };
        cpu::moe_experts(pool_, m(gate), m(up), m(down), gate.first_expert, x, ids, weights, rows, k, moe_scratch_,
                         out);
    }

    void add_sigmoid_gated(const float* gate_logit, const float* y, int32_t rows, int32_t dim, float* out) override {
        for_rows(rows, dim, [&](int64_t r) {
            const float g = 1.0f / (1.0f + std::exp(-gate_logit[r]));
            for (int64_t i = r * dim; i < (r + 1) * dim; ++i) out[i] += g * y[i];
        });
    }

    void set_step(const StepPlan& plan, int32_t block_size) override {
        step_ = &plan;
        block_size_ = block_size;
        seq_of_row_.resize(plan.num_tokens());
        for (int32_t s = 0; s < plan.num_seqs(); ++s)
            for (int32_t r = plan.query_start[s]; r < plan.query_start[s + 1]; ++r) seq_of_row_[r] = s;
    }

    void embedding(const PackedWeight& table, int64_t first_row, float* out) override {
        const auto& w = static_cast<const CpuWeight&>(table);
        for (int32_t i = 0; i < step_->num_tokens(); ++i)
            if (step_->token_ids[i] < 0) throw std::out_of_range("negative token id");
        for_rows(step_->num_tokens(), w.cols, [&](int64_t i) {
            const int64_t row = step_->token_ids[i] - first_row;
            if (row >= 0 && row < w.rows)
                cpu::widen_row(w.m, row, out + i * w.cols);
            else
                std::fill(out + i * w.cols, out + (i + 1) * w.cols, 0.0f);
        });
    }

    void add_rms_norm(float* residual, const float* delta, const float* weight, float eps, int32_t rows,
                      int32_t dim, float* out) override {
        for_rows(rows, dim, [&](int64_t r) {
            float* x = residual + r * dim;
            if (delta)
                for (int32_t j = 0; j < dim; ++j) x[j] += delta[r * dim + j];
            float ss = 0.0f;
            for (int32_t j = 0; j < dim; ++j) ss += x[j] * x[j];
            const float inv = 1.0f / std::sqrt(ss / dim + eps);
            for (int32_t j = 0; j < dim; ++j) out[r * dim + j] = weight[j] * (inv * x[j]);
        });
    }

    void rope_kv_write(float* q, const float* k, const float* v, const AttentionParams& a, const RopeParams& rope,
                       KVCache& cache, int32_t layer) override {
        if (cache.shape.dtype == KVDType::BF16)
            rope_kv_write_as<uint16_t>(q, k, v, a, rope, cache, layer);
        else
            rope_kv_write_as<float>(q, k, v, a, rope, cache, layer);
    }

    void paged_attention(const float* q, const AttentionParams& a, const KVCache& cache, int32_t layer,
                         float* out) override {
        if (cache.shape.dtype == KVDType::BF16)
            paged_attention_as<uint16_t>(q, a, cache, layer, out);
        else
            paged_attention_as<float>(q, a, cache, layer, out);
    }

    // The pool's elements: float, or bf16 bits (uint16_t).
    static float widen(float x) { return x; }
    static float widen(uint16_t x) { return bf16_to_f32(x); }
    template <class T>
    static T narrow(float x) {
        if constexpr (std::is_same_v<T, float>) return x;
        else return f32_to_bf16(x);
    }

    // k is rotated in float (as the row it came from), then stored: rounding to
    // bf16 happens once, after RoPE.
    template <class T>
    void rope_kv_write_as(float* q, const float* k, const float* v, const AttentionParams& a, const RopeParams& rope,
                          KVCache& cache, int32_t layer) {
        const int32_t hd = a.head_dim, n = step_->num_tokens(), half = rope.n_rot / 2;
        const int64_t kv_row = int64_t(a.n_kv_heads) * hd;
        T* k_pool = static_cast<T*>(cache.k[layer]);
        T* v_pool = static_cast<T*>(cache.v[layer]);
        // The frequencies once a call, the angles once a token: every head of
        // the token turns by the same ones.
        freqs_.resize(size_t(half));
        for (int32_t i = 0; i < half; ++i) {
            freqs_[size_t(i)] = std::pow(rope.base, -2.0f * i / rope.n_rot);
            if (rope.freq_factors) freqs_[size_t(i)] /= rope.freq_factors[i];
        }
        for_rows(n, int64_t(a.n_heads + a.n_kv_heads) * hd, [&](int64_t i) {
            thread_local std::vector<float> k_rot, cs;
            cs.resize(2 * size_t(half));
            const float pos = static_cast<float>(step_->positions[i]) * rope.position_scale;
            for (int32_t j = 0; j < half; ++j) {
                const float angle = pos * freqs_[size_t(j)];
                cs[2 * size_t(j)] = std::cos(angle);
                cs[2 * size_t(j) + 1] = std::sin(angle);
            }
            for (int32_t h = 0; h < a.n_heads; ++h) rotate(q + (i * a.n_heads + h) * hd, cs.data(), rope);
            if (step_->slot_mapping[i] < 0) return;  // a padding row (recorded steps) writes no KV
            k_rot.assign(k + i * kv_row, k + (i + 1) * kv_row);
            for (int32_t h = 0; h < a.n_kv_heads; ++h) rotate(k_rot.data() + int64_t(h) * hd, cs.data(), rope);
            T* k_dst = k_pool + int64_t(step_->slot_mapping[i]) * kv_row;
            T* v_dst = v_pool + int64_t(step_->slot_mapping[i]) * kv_row;
            for (int64_t j = 0; j < kv_row; ++j) {
                k_dst[j] = narrow<T>(k_rot[size_t(j)]);
                v_dst[j] = narrow<T>(v[i * kv_row + j]);
            }
        });
    }

    // Tiles of up to kAttentionLanes (row, head) pairs: a sequence's rows in
    // order, the heads of one kv head's group within each row.
    template <class T>
    void paged_attention_as(const float* q, const AttentionParams& a, const KVCache& cache, int32_t layer,
                            float* out) {
        const int32_t hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
        const StepPlan& p = *step_;
        tiles_.clear();
        for (int32_t sq = 0; sq < p.num_seqs(); ++sq)
            for (int32_t kvh = 0; kvh < a.n_kv_heads; ++kvh) {
                cpu::AttentionTile tile;
                tile.kv_head = kvh;
                for (int32_t r = p.query_start[sq]; r < p.query_start[sq + 1]; ++r)
                    for (int32_t g = 0; g < group; ++g) {
                        const int l = tile.lanes++;
                        tile.row[l] = r;
                        tile.head[l] = kvh * group + g;
                        tile.last[l] = p.positions[r];
                        tile.first[l] = a.window > 0 ? std::max(0, p.positions[r] - a.window + 1) : 0;
                        if (tile.lanes == cpu::kAttentionLanes) {
                            tiles_.push_back(tile);
                            tile.lanes = 0;
                        }
                    }
                if (tile.lanes > 0) tiles_.push_back(tile);
            }
        const T* k_pool = static_cast<const T*>(cache.k[layer]);
        const T* v_pool = static_cast<const T*>(cache.v[layer]);
        const int64_t kv_row = int64_t(a.n_kv_heads) * hd;
        // A causal prompt's later rows attend to more keys, so the pool's even
        // split of the list would give one thread most of the work: the tiles
        // are taken from both ends in turn (first, last, second, ...), which
        // gives every contiguous share about as many keys.
        const size_t n = tiles_.size();
        order_.resize(n);
        for (size_t i = 0; i < n; ++i) order_[i] = i % 2 ? n - 1 - i / 2 : i / 2;
        pool_.parallel_for(int64_t(n), 1, [&](int64_t t0, int64_t t1) {
            thread_local std::vector<float> scratch;
            for (int64_t i = t0; i < t1; ++i) {
                const cpu::AttentionTile& tile = tiles_[order_[size_t(i)]];
                const int32_t sq = seq_of_row_[tile.row[0]];
                const cpu::PagedSequence seq{p.block_tables.data() + int64_t(sq) * p.max_blocks_per_seq, block_size_,
                                             kv_row};
                cpu::attend_tile(tile, q, a.n_heads, hd, a.scale, k_pool, v_pool, seq, scratch, out);
            }
        });
    }

    void matmul(const float* x, const PackedWeight& pw, const float* bias, int32_t rows, float* out) override {
        cpu::matmul(pool_, static_cast<const CpuWeight&>(pw).m, x, rows, bias, out);
    }

    void swiglu(const float* gate, const float* up, int32_t rows, int32_t dim, float* out) override {
        for_rows(rows, dim, [&](int64_t r) {
            for (int64_t i = r * dim; i < (r + 1) * dim; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
        });
    }

    void geglu(const float* gate, const float* up, int32_t rows, int32_t dim, float* out) override {
        for_rows(rows, dim, [&](int64_t r) {
            for (int64_t i = r * dim; i < (r + 1) * dim; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
        });
    }

    void scale(float* x, int64_t n, float s) override {
        for (int64_t i = 0; i < n; ++i) x[i] *= s;
    }

    void gather_logit_rows(const float* x, int32_t dim, float* out) override {
        for (size_t i = 0; i < step_->logits_rows.size(); ++i)
            std::memcpy(out + i * dim, x + int64_t(step_->logits_rows[i]) * dim, dim * sizeof(float));
    }

    void sample(float* logits, int32_t vocab, std::span<const SamplingRow> rows, int32_t* out_ids) override {
        for (size_t i = 0; i < rows.size(); ++i) out_ids[i] = sample_row({logits + i * vocab, size_t(vocab)}, rows[i]);
    }

private:
    static float gelu_tanh(float x) {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }

    // Rows [0, rows) of an op, fn(row) each, over the pool when there are
    // enough of them (`width` floats a row) to be worth waking it: a decode
    // step's single row stays on this thread. Rows are independent, so the
    // split changes no bit.
    template <class Fn>
    void for_rows(int64_t rows, int64_t width, Fn&& fn) {
        const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, width));
        pool_.parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) fn(r);
        });
    }

    // Rotates one head's first n_rot dimensions by a token's angles: cs holds
    // cos, sin of each pair's angle.
    static void rotate(float* x, const float* cs, const RopeParams& rope) {
        const int32_t half = rope.n_rot / 2;
        for (int32_t i = 0; i < half; ++i) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            float& a = rope.neox ? x[i] : x[2 * i];
            float& b = rope.neox ? x[i + half] : x[2 * i + 1];
            const float a0 = a, b0 = b;
            // Explicit fmas: left to the compiler, a0 * c - b0 * s may be
            // contracted either way (a0 * c or b0 * s rounded first), and where a
            // vectorized loop peels for alignment the two parts of one rotation can
            // differ, so a row's bits would depend on where its buffer lies (on AMD
            // Zen 4 under -march=native, a key rotated on a worker thread differed
            // from the same key rotated on the calling thread).
            a = std::fma(a0, c, -(b0 * s));
            b = std::fma(a0, s, b0 * c);
        }
    }

    cpu::ThreadPool pool_;
    bool pads_decode_steps_ = false;
    const StepPlan* step_ = nullptr;
    int32_t block_size_ = 16;
    std::vector<int32_t> seq_of_row_;
    std::vector<cpu::AttentionTile> tiles_;  // paged_attention's, kept to reuse the memory
    std::vector<size_t> order_;              // the order the pool takes them in
    std::vector<float> freqs_;  // rope_kv_write's frequencies
    cpu::MoeScratch moe_scratch_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads, bool pads_decode_steps) {
    return std::make_unique<CpuBackend>(threads, pads_decode_steps);
}

}  // namespace minfer
