// The CPU reference backend: plain loops, float32 activations and accumulators.
// Every other backend is checked against these ops.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/float16.h"

namespace minfer {

namespace {

// Weights stay where they are (usually the file mapping); rows are read in
// their stored type and widened as they are used.
struct CpuWeight : PackedWeight {
    const uint8_t* data = nullptr;
    size_t row_bytes = 0;
};

// Dot product of a stored weight row with a float vector.
float dot_row(const CpuWeight& w, int64_t row, const float* x) {
    const uint8_t* p = w.data + row * w.row_bytes;
    float sum = 0.0f;
    switch (w.type) {
        case GGMLType::F32: {
            const auto* r = reinterpret_cast<const float*>(p);
            for (int64_t j = 0; j < w.cols; ++j) sum += r[j] * x[j];
            break;
        }
        case GGMLType::F16: {
            const auto* r = reinterpret_cast<const uint16_t*>(p);
            for (int64_t j = 0; j < w.cols; ++j) sum += fp16_to_f32(r[j]) * x[j];
            break;
        }
        case GGMLType::BF16: {
            const auto* r = reinterpret_cast<const uint16_t*>(p);
            for (int64_t j = 0; j < w.cols; ++j) sum += bf16_to_f32(r[j]) * x[j];
            break;
        }
        default: throw std::logic_error("cpu: unsupported weight type");
    }
    return sum;
}

void widen_row(const CpuWeight& w, int64_t row, float* out) {
    const uint8_t* p = w.data + row * w.row_bytes;
    for (int64_t j = 0; j < w.cols; ++j) {
        uint16_t h;
        switch (w.type) {
            case GGMLType::F32: std::memcpy(&out[j], p + 4 * j, 4); break;
            case GGMLType::F16: std::memcpy(&h, p + 2 * j, 2); out[j] = fp16_to_f32(h); break;
            case GGMLType::BF16: std::memcpy(&h, p + 2 * j, 2); out[j] = bf16_to_f32(h); break;
            default: throw std::logic_error("cpu: unsupported weight type");
        }
    }
}

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    void* alloc(size_t bytes) override {
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!p) throw std::bad_alloc();
        return p;
    }
    void free(void* p) override { std::free(p); }
    void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }

    std::unique_ptr<PackedWeight> pack_weight(const WeightView& v) override {
        auto w = std::make_unique<CpuWeight>();
        w->name = v.name;
        w->type = v.type;
        w->rows = v.rows;
        w->cols = v.cols;
        w->data = v.data;
        w->row_bytes = ggml_row_bytes(v.type, v.cols);
        return w;
    }

    void set_step(const StepPlan& plan, int32_t block_size) override {
        step_ = &plan;
        block_size_ = block_size;
        scores_.resize(plan.max_context_len());
    }

    void embedding(const PackedWeight& table, float* out) override {
        const auto& w = static_cast<const CpuWeight&>(table);
        for (int32_t i = 0; i < step_->num_tokens(); ++i) {
            const int32_t id = step_->token_ids[i];
            if (id < 0 || id >= w.rows) throw std::out_of_range("token id outside the vocabulary");
            widen_row(w, id, out + i * w.cols);
        }
    }

    void add_rms_norm(float* residual, const float* delta, const float* weight, float eps, int32_t rows,
                      int32_t dim, float* out) override {
        for (int32_t r = 0; r < rows; ++r) {
            float* x = residual + int64_t(r) * dim;
            if (delta)
                for (int32_t j = 0; j < dim; ++j) x[j] += delta[int64_t(r) * dim + j];
            float ss = 0.0f;
            for (int32_t j = 0; j < dim; ++j) ss += x[j] * x[j];
            const float inv = 1.0f / std::sqrt(ss / dim + eps);
            for (int32_t j = 0; j < dim; ++j) out[int64_t(r) * dim + j] = weight[j] * (inv * x[j]);
        }
    }

    void rope_kv_write(float* q, const float* k, const float* v, const AttentionParams& a, const RopeParams& rope,
                       KVCache& cache, int32_t layer) override {
        const int32_t hd = a.head_dim, n = step_->num_tokens();
        const int64_t kv_row = int64_t(a.n_kv_heads) * hd;
        float* k_pool = cache.k[layer];
        float* v_pool = cache.v[layer];
        for (int32_t i = 0; i < n; ++i) {
            const float pos = static_cast<float>(step_->positions[i]) * rope.position_scale;
            for (int32_t h = 0; h < a.n_heads; ++h) rotate(q + (int64_t(i) * a.n_heads + h) * hd, pos, rope);
            float* k_dst = k_pool + int64_t(step_->slot_mapping[i]) * kv_row;
            std::memcpy(k_dst, k + i * kv_row, kv_row * sizeof(float));
            for (int32_t h = 0; h < a.n_kv_heads; ++h) rotate(k_dst + int64_t(h) * hd, pos, rope);
            std::memcpy(v_pool + int64_t(step_->slot_mapping[i]) * kv_row, v + i * kv_row, kv_row * sizeof(float));
        }
    }

    void paged_attention(const float* q, const AttentionParams& a, const KVCache& cache, int32_t layer,
                         float* out) override {
        const int32_t hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
        const int64_t kv_row = int64_t(a.n_kv_heads) * hd;
        const float* k_pool = cache.k[layer];
        const float* v_pool = cache.v[layer];
        const StepPlan& p = *step_;
        for (int32_t s = 0; s < p.num_seqs(); ++s) {
            const int32_t* table = p.block_tables.data() + int64_t(s) * p.max_blocks_per_seq;
            for (int32_t r = p.query_start[s]; r < p.query_start[s + 1]; ++r) {
                const int32_t pos = p.positions[r];
                const int32_t first = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
                for (int32_t h = 0; h < a.n_heads; ++h) {
                    const float* qh = q + (int64_t(r) * a.n_heads + h) * hd;
                    const int64_t kv_off = int64_t(h / group) * hd;
                    auto slot = [&](int32_t t) { return int64_t(table[t / block_size_]) * block_size_ + t % block_size_; };
                    float max_score = -INFINITY;
                    for (int32_t t = first; t <= pos; ++t) {
                        const float* kt = k_pool + slot(t) * kv_row + kv_off;
                        float dot = 0.0f;
                        for (int32_t j = 0; j < hd; ++j) dot += qh[j] * kt[j];
                        scores_[t] = dot * a.scale;
                        max_score = std::max(max_score, scores_[t]);
                    }
                    float total = 0.0f;
                    for (int32_t t = first; t <= pos; ++t) {
                        scores_[t] = std::exp(scores_[t] - max_score);
                        total += scores_[t];
                    }
                    float* oh = out + (int64_t(r) * a.n_heads + h) * hd;
                    std::fill(oh, oh + hd, 0.0f);
                    for (int32_t t = first; t <= pos; ++t) {
                        const float* vt = v_pool + slot(t) * kv_row + kv_off;
                        const float wgt = scores_[t] / total;
                        for (int32_t j = 0; j < hd; ++j) oh[j] += wgt * vt[j];
                    }
                }
            }
        }
    }

    void matmul(const float* x, const PackedWeight& pw, const float* bias, int32_t rows, float* out) override {
        const auto& w = static_cast<const CpuWeight&>(pw);
        for (int32_t r = 0; r < rows; ++r)
            for (int64_t o = 0; o < w.rows; ++o)
                out[r * w.rows + o] = dot_row(w, o, x + r * w.cols) + (bias ? bias[o] : 0.0f);
    }

    void swiglu(const float* gate, const float* up, int32_t rows, int32_t dim, float* out) override {
        for (int64_t i = 0; i < int64_t(rows) * dim; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }

    void gather_logit_rows(const float* x, int32_t dim, float* out) override {
        for (size_t i = 0; i < step_->logits_rows.size(); ++i)
            std::memcpy(out + i * dim, x + int64_t(step_->logits_rows[i]) * dim, dim * sizeof(float));
    }

    void sample(float* logits, int32_t vocab, std::span<const SamplingRow> rows, int32_t* out_ids) override {
        for (size_t i = 0; i < rows.size(); ++i) out_ids[i] = sample_row({logits + i * vocab, size_t(vocab)}, rows[i]);
    }

private:
    // Rotates one head's first n_rot dimensions by position-dependent angles.
    static void rotate(float* x, float pos, const RopeParams& rope) {
        const int32_t half = rope.n_rot / 2;
        for (int32_t i = 0; i < half; ++i) {
            float freq = std::pow(rope.base, -2.0f * i / rope.n_rot);
            if (rope.freq_factors) freq /= rope.freq_factors[i];
            const float angle = pos * freq, c = std::cos(angle), s = std::sin(angle);
            float& a = rope.neox ? x[i] : x[2 * i];
            float& b = rope.neox ? x[i + half] : x[2 * i + 1];
            const float a0 = a, b0 = b;
            a = a0 * c - b0 * s;
            b = a0 * s + b0 * c;
        }
    }

    const StepPlan* step_ = nullptr;
    int32_t block_size_ = 16;
    std::vector<float> scores_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace minfer
