#include "kernels/cpu/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/float16.h"
#include "engine/quant.h"
#include "kernels/cpu/vec_dot.h"

namespace minfer::cpu {

namespace {

constexpr int kPanel = 32;  // weight rows per GEMM panel (two 16-float vectors)

// ---- GEMM micro-kernel: MR activation rows x 32 outputs over the whole K ----
// c[r][j] = sum_k x[r][k] * panel[k][j]. Accumulators stay in registers: MR x 2
// vectors of 16 floats with AVX-512, MR x 4 of 8 with AVX2.
template <int MR>
void micro_kernel(const float* x, int64_t ldx, const float* panel, int64_t K, float* c) {
#if defined(__AVX512F__)
    __m512 acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
        const __m512 w0 = _mm512_loadu_ps(panel + k * kPanel);
        const __m512 w1 = _mm512_loadu_ps(panel + k * kPanel + 16);
        for (int r = 0; r < MR; ++r) {
            const __m512 xv = _mm512_set1_ps(x[r * ldx + k]);
            acc[r][0] = _mm512_fmadd_ps(xv, w0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(xv, w1, acc[r][1]);
        }
    }
    for (int r = 0; r < MR; ++r) {
        _mm512_storeu_ps(c + r * kPanel, acc[r][0]);
        _mm512_storeu_ps(c + r * kPanel + 16, acc[r][1]);
    }
#elif defined(__AVX2__)
    __m256 acc[MR][4];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < 4; ++v) acc[r][v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
        for (int r = 0; r < MR; ++r) {
            const __m256 xv = _mm256_set1_ps(x[r * ldx + k]);
            for (int v = 0; v < 4; ++v)
                acc[r][v] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(panel + k * kPanel + 8 * v), acc[r][v]);
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < 4; ++v) _mm256_storeu_ps(c + r * kPanel + 8 * v, acc[r][v]);
#else
    float acc[MR][kPanel] = {};
    for (int64_t k = 0; k < K; ++k)
        for (int r = 0; r < MR; ++r)
            for (int j = 0; j < kPanel; ++j) acc[r][j] += x[r * ldx + k] * panel[k * kPanel + j];
    std::memcpy(c, acc, sizeof(acc));
#endif
}

#if defined(__AVX512F__)
constexpr int kMR = 8;  // 16 accumulators of 32
#elif defined(__AVX2__)
constexpr int kMR = 3;  // 12 accumulators of 16
#else
constexpr int kMR = 4;
#endif

void run_micro_kernel(int mr, const float* x, int64_t ldx, const float* panel, int64_t K, float* c) {
    switch (mr) {
        case 8: if constexpr (kMR >= 8) { micro_kernel<8>(x, ldx, panel, K, c); return; } [[fallthrough]];
        case 7: if constexpr (kMR >= 7) { micro_kernel<7>(x, ldx, panel, K, c); return; } [[fallthrough]];
        case 6: if constexpr (kMR >= 6) { micro_kernel<6>(x, ldx, panel, K, c); return; } [[fallthrough]];
        case 5: if constexpr (kMR >= 5) { micro_kernel<5>(x, ldx, panel, K, c); return; } [[fallthrough]];
        case 4: if constexpr (kMR >= 4) { micro_kernel<4>(x, ldx, panel, K, c); return; } [[fallthrough]];
        case 3: micro_kernel<3>(x, ldx, panel, K, c); return;
        case 2: micro_kernel<2>(x, ldx, panel, K, c); return;
        default: micro_kernel<1>(x, ldx, panel, K, c); return;
    }
}

// Widens weight rows [o0, o0 + n) into panel[k][j] (zeros past n).
void pack_panel(const MatmulWeight& w, int64_t o0, int64_t n, float* row_buf, float* panel) {
    const int64_t K = w.cols;
    for (int64_t j = 0; j < kPanel; ++j) {
        if (j < n) {
            widen_row(w, o0 + j, row_buf);
            for (int64_t k = 0; k < K; ++k) panel[k * kPanel + j] = row_buf[k];
        } else {
            for (int64_t k = 0; k < K; ++k) panel[k * kPanel + j] = 0.0f;
        }
    }
}

void gemm(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out) {
    const int64_t N = w.rows, K = w.cols;
    const int64_t panels = (N + kPanel - 1) / kPanel;
    pool.parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
        // Grown once per thread and kept: steps after the first allocate nothing.
        thread_local std::vector<float> panel, row_buf;
        panel.resize(size_t(K) * kPanel);
        row_buf.resize(size_t(K));
        float c[kMR * kPanel];
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t o0 = p * kPanel, n = std::min<int64_t>(kPanel, N - o0);
            pack_panel(w, o0, n, row_buf.data(), panel.data());
            for (int64_t r0 = 0; r0 < rows; r0 += kMR) {
                const int mr = int(std::min<int64_t>(kMR, rows - r0));
                run_micro_kernel(mr, x + r0 * K, K, panel.data(), K, c);
                for (int r = 0; r < mr; ++r)
                    for (int64_t j = 0; j < n; ++j)
                        out[(r0 + r) * N + o0 + j] = c[r * kPanel + j] + (bias ? bias[o0 + j] : 0.0f);
            }
        }
    });
}

void gemv(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out) {
    const int64_t N = w.rows, K = w.cols;
    const ActFormat fmt = act_format(w.type);
    const size_t act_bytes = act_row_bytes(fmt, K);
    thread_local std::vector<uint8_t> acts;
    acts.resize(act_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) prepare_activations(fmt, x + r * K, acts.data() + r * act_bytes, K);
    const uint8_t* a = acts.data();
    // Each thread takes a contiguous range of output features, so the weights
    // stream from memory once. Below ~32K multiply-adds a task, waking another
    // thread costs more than it saves.
    const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(1, K * rows));
    pool.parallel_for(N, grain, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o)
            for (int64_t r = 0; r < rows; ++r)
                out[r * N + o] = vec_dot(w.type, w.row(o), a + r * act_bytes, K) + (bias ? bias[o] : 0.0f);
    });
}

}  // namespace

void widen_row(const MatmulWeight& w, int64_t r, float* out) {
    const uint8_t* p = w.row(r);
    const int64_t K = w.cols;
    switch (w.type) {
        case GGMLType::F32: std::memcpy(out, p, size_t(K) * 4); return;
        case GGMLType::F16: {
            int64_t k = 0;
#if defined(__F16C__)
            for (; k + 8 <= K; k += 8)
                _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * k))));
#endif
            for (; k < K; ++k) {
                uint16_t h;
                std::memcpy(&h, p + 2 * k, 2);
                out[k] = fp16_to_f32(h);
            }
            return;
        }
        case GGMLType::BF16:
            for (int64_t k = 0; k < K; ++k) {
                uint16_t h;
                std::memcpy(&h, p + 2 * k, 2);
                out[k] = bf16_to_f32(h);
            }
            return;
        default: dequantize_row(w.type, p, out, K); return;
    }
}

void matmul(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out) {
    if (rows <= kGemvMaxRows)
        gemv(pool, w, x, rows, bias, out);
    else
        gemm(pool, w, x, rows, bias, out);
}

void matmul_reference(const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out) {
    std::vector<float> wr(size_t(w.cols));
    for (int64_t o = 0; o < w.rows; ++o) {
        widen_row(w, o, wr.data());
        for (int64_t r = 0; r < rows; ++r) {
            double acc = bias ? bias[o] : 0.0;
            for (int64_t k = 0; k < w.cols; ++k) acc += double(wr[k]) * x[r * w.cols + k];
            out[r * w.rows + o] = float(acc);
        }
    }
}

}  // namespace minfer::cpu
