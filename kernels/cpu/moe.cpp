#include "kernels/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace minfer::cpu {

void moe_route(const float* logits, int64_t rows, int32_t n_experts, int32_t k, bool renormalize, int32_t* ids,
               float* weights) {
    if (k <= 0 || k > n_experts) throw std::invalid_argument("moe_route: k must be in [1, n_experts]");
    std::vector<float> p(static_cast<size_t>(n_experts));
    std::vector<int32_t> order(static_cast<size_t>(n_experts));
    for (int64_t r = 0; r < rows; ++r) {
        const float* l = logits + r * n_experts;
        const float max = *std::max_element(l, l + n_experts);
        double sum = 0;
        for (int32_t e = 0; e < n_experts; ++e) sum += p[size_t(e)] = std::exp(l[e] - max);
        for (float& v : p) v = float(v / sum);
        std::iota(order.begin(), order.end(), 0);
        const auto more_probable = [&](int32_t a, int32_t b) {
            return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), more_probable);
        double chosen = 0;
        for (int32_t j = 0; j < k; ++j) chosen += p[size_t(order[size_t(j)])];
        for (int32_t j = 0; j < k; ++j) {
            const int32_t e = order[size_t(j)];
            ids[r * k + j] = e;
            weights[r * k + j] = renormalize ? float(p[size_t(e)] / chosen) : p[size_t(e)];
        }
    }
}

void moe_experts(ThreadPool& pool, std::span<const MatmulWeight> gate, std::span<const MatmulWeight> up,
                 std::span<const MatmulWeight> down, int32_t first_expert, const float* x, const int32_t* ids,
                 const float* weights, int64_t rows, int32_t k, MoeScratch& s, float* out) {
    const int32_t n_experts = int32_t(gate.size());
    const int64_t dim = gate[0].cols, ffn = gate[0].rows, pairs = rows * k;
    // The pair's expert in this slice, or -1 (another rank's).
    const auto local = [&](int64_t p) {
        if (ids[p] < 0) throw std::invalid_argument("moe_experts: negative expert id");
        const int32_t e = ids[p] - first_expert;
        return e < n_experts ? e : -1;
    };
    // Counting sort of this slice's (row, slot) pairs by expert, rows ascending within one.
    s.starts.assign(size_t(n_experts) + 1, 0);
    for (int64_t p = 0; p < pairs; ++p)
        if (const int32_t e = local(p); e >= 0) ++s.starts[size_t(e) + 1];
    std::partial_sum(s.starts.begin(), s.starts.end(), s.starts.begin());
    s.pairs.resize(size_t(pairs));
    s.next.assign(s.starts.begin(), s.starts.end() - 1);
    for (int64_t p = 0; p < pairs; ++p)
        if (const int32_t e = local(p); e >= 0) s.pairs[size_t(s.next[size_t(e)]++)] = int32_t(p);

    // Each expert over its rows; its outputs land in y at the pairs' places.
    s.x.resize(size_t(pairs * dim));
    s.gate.resize(size_t(pairs * ffn));
    s.up.resize(size_t(pairs * ffn));
    s.y.resize(size_t(pairs * dim));
    for (int32_t e = 0; e < n_experts; ++e) {
        const int32_t first = s.starts[size_t(e)], m = s.starts[size_t(e) + 1] - first;
        if (m == 0) continue;
        float* xs = s.x.data();
        for (int32_t i = 0; i < m; ++i)
            std::memcpy(xs + i * dim, x + (s.pairs[size_t(first + i)] / k) * dim, size_t(dim) * sizeof(float));
        matmul(pool, gate[size_t(e)], xs, m, nullptr, s.gate.data());
        matmul(pool, up[size_t(e)], xs, m, nullptr, s.up.data());
        float* g = s.gate.data();
        const float* u = s.up.data();
        for (int64_t i = 0; i < m * ffn; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
        s.expert_y.resize(size_t(m * dim));
        matmul(pool, down[size_t(e)], g, m, nullptr, s.expert_y.data());
        for (int32_t i = 0; i < m; ++i)
            std::memcpy(s.y.data() + int64_t(s.pairs[size_t(first + i)]) * dim, s.expert_y.data() + i * dim,
                        size_t(dim) * sizeof(float));
    }
    // The combine, in each row's routing order, over this slice's pairs.
    for (int64_t r = 0; r < rows; ++r) {
        float* o = out + r * dim;
        bool first = true;
        for (int32_t j = 0; j < k; ++j) {
            if (local(r * k + j) < 0) continue;
            const float w = weights[r * k + j];
            const float* y = s.y.data() + (r * k + j) * dim;
            if (first)
                for (int64_t i = 0; i < dim; ++i) o[i] = w * y[i];
            else
                for (int64_t i = 0; i < dim; ++i) o[i] += w * y[i];
            first = false;
        }
        if (first) std::fill(o, o + dim, 0.0f);
    }
}

}  // namespace minfer::cpu
