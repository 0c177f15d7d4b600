#include "kernels/cpu/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/formats/float16.h"
#include "kernels/formats/quant.h"
#include "kernels/cpu/vec_dot.h"

namespace minfer::cpu {

namespace {

// Prepared activation rows, 64-byte aligned for the vector loads.
struct alignas(64) Line {
    uint8_t bytes[64];
};

// Every activation row prepared once by prepare(row, dst), the same way
// whatever else is in the batch, on the pool, into storage this thread keeps
// (grown once: later steps allocate nothing). Rows are act_bytes apart.
template <class Prepare>
uint8_t* prepare_rows(ThreadPool& pool, int64_t rows, int64_t K, size_t act_bytes, Prepare&& prepare) {
    thread_local std::vector<Line> acts;
    acts.resize(act_bytes * size_t(rows) / sizeof(Line) + 1);
    uint8_t* a = acts[0].bytes;
    pool.parallel_for(rows, std::max<int64_t>(1, 8192 / K), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) prepare(r, a + r * act_bytes);
    });
    return a;
}

// The work split: by units of weight rows (each thread streams its own
// weights), and by parts of whole row tiles too when there are too few units
// to go round. run(r_begin, r_end, u0, u1) gets contiguous units of one part.
template <class Run>
void split_work(ThreadPool& pool, int64_t rows, int rm, int64_t units, int64_t unit_weight_rows, int64_t K, Run&& run) {
    const int64_t row_tiles = (rows + rm - 1) / rm;
    const int64_t row_parts = std::clamp<int64_t>(4 * pool.size() / units, 1, row_tiles);
    const int64_t part_rows = (row_tiles + row_parts - 1) / row_parts * rm;
    // Below ~64K multiply-adds a task, waking another thread costs more than it saves.
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K * std::min(rows, part_rows) * unit_weight_rows));
    // Task u is row part u / units, unit u % units.
    pool.parallel_for(row_parts * units, grain, [&](int64_t u0, int64_t u1) {
        while (u0 < u1) {
            const int64_t part = u0 / units, first = u0 % units, last = std::min(units, first + (u1 - u0));
            run(part * part_rows, std::min(rows, (part + 1) * part_rows), first, last);
            u0 += last - first;
        }
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
            for (; k < K; ++k) out[k] = fp16_to_f32(load_half_bits(p + 2 * k));
            return;
        }
        case GGMLType::BF16:
            for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_f32(load_half_bits(p + 2 * k));
            return;
        default: dequantize_row(w.type, p, out, K); return;
    }
}

namespace {

// The panel types (panels.h): tiles of activation rows x groups of panels,
// each group's weights swept by all row tiles while they are in cache.
void matmul_panels(ThreadPool& pool, const PanelMatrix& w, const float* x, int64_t rows, const float* bias,
                   float* out) {
    const int64_t N = w.rows, K = w.cols;
    const size_t act_bytes = panel_act_bytes(w.type, K);
    const uint8_t* a = prepare_rows(pool, rows, K, act_bytes,
                                    [&](int64_t r, uint8_t* dst) { prepare_panel_activations(w.type, x + r * K, dst, K); });

    const PanelTileShape ts = panel_tile_shape(w.type, rows == 1);
    const int64_t groups = (w.panels + ts.np - 1) / ts.np;

    auto run = [&](int64_t r_begin, int64_t r_end, int64_t g0, int64_t g1) {
        for (int64_t g = g0; g < g1; ++g) {
            const int64_t p0 = g * ts.np;
            const int np = int(std::min<int64_t>(ts.np, w.panels - p0));
            const bool whole = kPanelRows * (p0 + np) <= N;  // else the last rows go through `tail`
            for (int64_t r0 = r_begin; r0 < r_end; r0 += ts.rm) {
                const int rm = int(std::min<int64_t>(ts.rm, r_end - r0));
                const PanelTileFn fn = panel_tile_fn(w.type, rm, np);
                const uint8_t* act = a + r0 * act_bytes;
                if (whole) {
                    fn(w, p0, act, act_bytes, out + r0 * N + kPanelRows * p0, N);
                    continue;
                }
                float tail[8 * kPanelRows * 8];
                fn(w, p0, act, act_bytes, tail, kPanelRows * np);
                for (int i = 0; i < rm; ++i)
                    std::memcpy(out + (r0 + i) * N + kPanelRows * p0, tail + i * kPanelRows * np,
                                size_t(N - kPanelRows * p0) * sizeof(float));
            }
            if (bias)
                for (int64_t r = r_begin; r < r_end; ++r)
                    for (int64_t o = kPanelRows * p0; o < std::min(N, kPanelRows * (p0 + np)); ++o) out[r * N + o] += bias[o];
        }
    };
    split_work(pool, rows, ts.rm, groups, int64_t(kPanelRows) * ts.np, K, run);
}

}  // namespace

bool matmul_supports(GGMLType t) { return uses_panels(t) || has_vec_dot(t); }

void matmul(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out) {
    const int64_t N = w.rows, K = w.cols;
    if (rows <= 0 || N <= 0) return;
    if (uses_panels(w.type)) {
        if (w.panels) return matmul_panels(pool, *w.panels, x, rows, bias, out);
        const PanelMatrix packed = pack_panels(w);
        return matmul_panels(pool, packed, x, rows, bias, out);
    }
    // Activations quantized for quantized weights.
    const ActFormat fmt = act_format(w.type);
    const size_t act_bytes = act_row_bytes(fmt, K);
    const uint8_t* a =
        prepare_rows(pool, rows, K, act_bytes, [&](int64_t r, uint8_t* dst) { prepare_activations(fmt, x + r * K, dst, K); });

    const TileShape ts = tile_shape(w.type);
    const int64_t col_tiles = (N + ts.rn - 1) / ts.rn;  // tiles of ts.rn weight rows
    // Weight rows swept by all row tiles before moving on: ~1 MB, so they stay
    // in L2 (2 MB here) while the activations stream past.
    const int64_t block = std::max<int64_t>(1, (1 << 20) / int64_t(w.row_bytes * ts.rn));

    // Rows [r_begin, r_end) x column tiles [t0, t1).
    auto run = [&](int64_t r_begin, int64_t r_end, int64_t t0, int64_t t1) {
        for (int64_t b0 = t0; b0 < t1; b0 += block) {
            const int64_t b1 = std::min(t1, b0 + block);
            for (int64_t r0 = r_begin; r0 < r_end; r0 += ts.rm) {
                const int rm = int(std::min<int64_t>(ts.rm, r_end - r0));
                const DotTileFn full = dot_tile_fn(w.type, rm, ts.rn);
                for (int64_t t = b0; t < b1; ++t) {
                    const int64_t o0 = t * ts.rn;
                    const int rn = int(std::min<int64_t>(ts.rn, N - o0));
                    (rn == ts.rn ? full : dot_tile_fn(w.type, rm, rn))(w.row(o0), w.row_bytes, a + r0 * act_bytes,
                                                                        act_bytes, K, out + r0 * N + o0, N);
                }
            }
        }
        if (bias)
            for (int64_t r = r_begin; r < r_end; ++r)
                for (int64_t o = t0 * ts.rn; o < std::min(N, t1 * ts.rn); ++o) out[r * N + o] += bias[o];
    };
    split_work(pool, rows, ts.rm, col_tiles, ts.rn, K, run);
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
