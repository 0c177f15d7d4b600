// Paged attention for decode steps (one query row a sequence), split along the
// keys (flash-decoding); attention.cu's dispatch takes it when
// decode_attention_usable.
//
// decode_kernel: one block per (row, kv head, split of the key range). The
// block handles every q head of the kv head's GQA group, so K and V are read
// once per group: tiles of 32 keys are copied into shared memory with 16-byte
// cp.async (double-buffered), then lane j of each warp scores key j for the
// warp's heads, an online softmax runs per head, and the lanes accumulate P*V
// over float4 columns. decode_bf16_kernel: the same blocking over a bf16 pool
// on bf16 m16n8k16 tensor cores (see its section). With more than one split,
// each block writes an unnormalised partial (m, l, acc) to the workspace
// (m = -inf, l = 0 when its split lies outside the row's keys) and
// combine_kernel merges the splits in split order (deterministic). The launch
// shape depends only on num_tokens, max_blocks_per_seq, block_size and the head
// shape (CUDA-graph friendly).
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/int8_act.cuh"

namespace minfer::cuda {

namespace {

// ---- decode kernel (split along the keys) + combine ----------------------------------

constexpr int kDecThreads = 128;
constexpr int kDecWarps = kDecThreads / 32;
constexpr int kDecKeys = 32;                            // keys per tile (= lanes: lane j scores key j)
constexpr int kDecMaxGroup = 16;                        // q heads per kv head
constexpr int kDecHeadsPerWarp = kDecMaxGroup / kDecWarps;  // warp w owns heads w, w+4, w+8, w+12
constexpr int kDecMinSplit = 64;                        // keys per split at least (one tile of decode_bf16_kernel)
constexpr int kDecTargetBlocks = 4 * 132;               // ~4 blocks per SM of an H100/H200

struct DecodeArgs {
    HeadShape heads;
    float scale;
    int32_t window;
    int32_t split_len;   // keys per split, a multiple of kDecKeys
    int32_t num_splits;
    float* part_o;       // [num_tokens][n_heads][num_splits][head_dim]
    float* part_ml;      // [num_tokens][n_heads][num_splits][2]
    float* out;
    Int8Act out8;        // an int8 copy of out for o_proj's int8 GEMV, written by the combine (q null: none)
};

// The keys of split `split` that decode row `row` attends to, lo..hi. When the
// split holds none (lo > hi), its partial (m, l) is written as empty for the
// combine, and the block has nothing more to do.
__device__ __forceinline__ bool decode_split_keys(const DeviceStep& st, const DecodeArgs& a, int32_t row,
                                                  int32_t split, int32_t head0, int32_t group, int32_t& lo,
                                                  int32_t& hi) {
    const int32_t pos = st.positions[row];
    lo = max(window_first(pos, a.window), split * a.split_len);
    hi = min(pos, split * a.split_len + a.split_len - 1);
    if (lo <= hi) return true;
    if (a.num_splits > 1 && int32_t(threadIdx.x) < group) {
        float* ml = a.part_ml + ((int64_t(row) * a.heads.n_heads + head0 + threadIdx.x) * a.num_splits + split) * 2;
        ml[0] = -INFINITY;
        ml[1] = 0.0f;
    }
    return false;
}

struct DecodePlan {
    int32_t split_len = 0, num_splits = 1;
};

// Depends only on the step's shape (never on context lengths): graph-capture safe.
DecodePlan decode_plan(const DeviceStep& st, HeadShape heads) {
    const int64_t max_ctx = std::max<int64_t>(1, int64_t(st.max_blocks_per_seq) * st.block_size);
    const int64_t base = std::max<int64_t>(1, int64_t(st.num_tokens) * heads.n_kv_heads);
    int64_t splits = (kDecTargetBlocks + base - 1) / base;
    splits = std::min<int64_t>(splits, (max_ctx + kDecMinSplit - 1) / kDecMinSplit);
    splits = std::max<int64_t>(splits, 1);
    int64_t len = (max_ctx + splits - 1) / splits;
    len = (len + kDecKeys - 1) / kDecKeys * kDecKeys;
    DecodePlan p;
    p.split_len = int32_t(len);
    p.num_splits = int32_t((max_ctx + len - 1) / len);
    return p;
}

// K rows in shared memory are padded by one 16-byte copy (ldk = hd + kPerCopy):
// lane j reads key j's row, and the padding spreads the lanes over the banks.
template <class T>
size_t decode_smem_bytes(HeadShape heads) {
    const int32_t hd = heads.head_dim, group = heads.n_heads / heads.n_kv_heads;
    return sizeof(float) * (size_t(group) * hd + size_t(group) * kDecKeys) +
           sizeof(T) * (2 * kDecKeys * size_t(hd + kPerCopy<T>) + 2 * kDecKeys * size_t(hd));
}

template <class T>
__global__ void __launch_bounds__(kDecThreads) decode_kernel(DeviceStep st, const float* __restrict__ q,
                                                             const T* __restrict__ k_pool,
                                                             const T* __restrict__ v_pool, DecodeArgs a) {
    pdl_wait();
    extern __shared__ float4 dec_smem4[];
    constexpr int E = kPerCopy<T>;
    const int32_t row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    const int32_t hd = a.heads.head_dim, c4 = hd / 4, ldk = hd + E, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size;
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* q_s = reinterpret_cast<float*>(dec_smem4);  // [group][hd]
    float* p_s = q_s + group * hd;                      // [group][kDecKeys]
    T* k_s = reinterpret_cast<T*>(p_s + group * kDecKeys);  // [2][kDecKeys][hd + E]
    T* v_s = k_s + 2 * kDecKeys * ldk;                      // [2][kDecKeys][hd]

    const int32_t head0 = kvh * group;
    int32_t lo, hi;
    if (!decode_split_keys(st, a, row, split, head0, group, lo, hi)) return;

    const int64_t kv_row = int64_t(a.heads.n_kv_heads) * hd;
    const int32_t* table = st.block_tables + int64_t(st.row_seq[row]) * st.max_blocks_per_seq;
    const int32_t copies = hd / E;  // 16-byte copies per key
    auto load_tile = [&](int stage, int32_t t0) {
        T* ks = k_s + stage * kDecKeys * ldk;
        T* vs = v_s + stage * kDecKeys * hd;
        for (int32_t i = threadIdx.x; i < kDecKeys * copies; i += kDecThreads) {
            const int32_t key = i / copies, c = i - key * copies, t = t0 + key;
            const bool ok = t <= hi;
            int64_t off = 0;
            if (ok) off = (int64_t(table[t / bs]) * bs + t % bs) * kv_row + int64_t(kvh) * hd + c * E;
            cp_async16(ks + key * ldk + c * E, k_pool + off, ok);
            cp_async16(vs + key * hd + c * E, v_pool + off, ok);
        }
    };

    const int32_t ntiles = (hi - lo + kDecKeys) / kDecKeys;
    load_tile(0, lo);
    cp_async_commit();
    {
        const float4* qg = reinterpret_cast<const float4*>(q + (int64_t(row) * n_heads + head0) * hd);
        float4* qs4 = reinterpret_cast<float4*>(q_s);
        for (int32_t i = threadIdx.x; i < group * c4; i += kDecThreads) qs4[i] = qg[i];
    }

    float m[kDecHeadsPerWarp], l[kDecHeadsPerWarp], acc[kDecHeadsPerWarp][2][4];
#pragma unroll
    for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
        m[hh] = -INFINITY;
        l[hh] = 0.0f;
#pragma unroll
        for (int cc = 0; cc < 2; ++cc)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[hh][cc][e] = 0.0f;
    }

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kDecKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kDecKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const T* ks = k_s + (it & 1) * kDecKeys * ldk;
        const T* vs = v_s + (it & 1) * kDecKeys * hd;

        if (warp < group) {
            // Scores: lane = key, the warp's heads share each K load. A load is one
            // 16-byte copy (4 floats or 8 bf16; the padded rows keep a quarter-warp's
            // 16-byte loads on distinct banks, where 8-byte bf16 loads met two-way
            // conflicts), and two sums per head halve the chain of dependent FMAs.
            float s[kDecHeadsPerWarp] = {}, s2[kDecHeadsPerWarp] = {};
            const T* krow = ks + lane * ldk;
            auto score_copy = [&](int32_t d, float (&sum)[kDecHeadsPerWarp]) {
                float kf[E];
                load_copy(krow + d, kf);
#pragma unroll
                for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                    const int32_t g = warp + hh * kDecWarps;
                    if (g < group) {
#pragma unroll
                        for (int e = 0; e < E; e += 4) {
                            const float4 qv = *reinterpret_cast<const float4*>(q_s + g * hd + d + e);
                            sum[hh] = fmaf(qv.x, kf[e], sum[hh]);
                            sum[hh] = fmaf(qv.y, kf[e + 1], sum[hh]);
                            sum[hh] = fmaf(qv.z, kf[e + 2], sum[hh]);
                            sum[hh] = fmaf(qv.w, kf[e + 3], sum[hh]);
                        }
                    }
                }
            };
            for (int32_t d = 0; d < hd; d += 2 * E) {
                score_copy(d, s);
                if (d + E < hd) score_copy(d + E, s2);
            }
#pragma unroll
            for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) s[hh] += s2[hh];
            const bool valid = t0 + lane <= hi;  // every tile has at least its first key valid
            float alpha[kDecHeadsPerWarp];
#pragma unroll
            for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                const int32_t g = warp + hh * kDecWarps;
                alpha[hh] = 1.0f;
                if (g < group) {
                    const float sc = valid ? s[hh] * a.scale : -INFINITY;
                    const float m_new = fmaxf(m[hh], warp_max(sc));  // finite
                    alpha[hh] = expf(m[hh] - m_new);                 // 0 on the first tile
                    const float p = valid ? expf(sc - m_new) : 0.0f;
                    l[hh] = l[hh] * alpha[hh] + warp_sum(p);
                    m[hh] = m_new;
                    p_s[g * kDecKeys + lane] = p;
                }
            }
            __syncwarp();
            // P*V: lane = float4 column (and column + 32 for head dims over 128).
#pragma unroll
            for (int hh = 0; hh < kDecHeadsPerWarp; ++hh)
#pragma unroll
                for (int cc = 0; cc < 2; ++cc)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[hh][cc][e] *= alpha[hh];
            const int32_t count = min(kDecKeys, hi - t0 + 1);
            for (int32_t j = 0; j < count; j += 4) {  // V and p past count are zeros
                float4 pj[kDecHeadsPerWarp];
#pragma unroll
                for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                    const int32_t g = warp + hh * kDecWarps;
                    pj[hh] = g < group ? *reinterpret_cast<const float4*>(p_s + g * kDecKeys + j)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
                }
#pragma unroll
                for (int cc = 0; cc < 2; ++cc) {
                    const int32_t c = lane + cc * 32;
                    if (c < c4) {
                        const float4 v0 = load4(vs + (j + 0) * hd + c * 4);
                        const float4 v1 = load4(vs + (j + 1) * hd + c * 4);
                        const float4 v2 = load4(vs + (j + 2) * hd + c * 4);
                        const float4 v3 = load4(vs + (j + 3) * hd + c * 4);
#pragma unroll
                        for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                            if (warp + hh * kDecWarps < group) {
                                float* o = acc[hh][cc];
                                const float4 p = pj[hh];
                                o[0] = fmaf(p.x, v0.x, o[0]); o[1] = fmaf(p.x, v0.y, o[1]);
                                o[2] = fmaf(p.x, v0.z, o[2]); o[3] = fmaf(p.x, v0.w, o[3]);
                                o[0] = fmaf(p.y, v1.x, o[0]); o[1] = fmaf(p.y, v1.y, o[1]);
                                o[2] = fmaf(p.y, v1.z, o[2]); o[3] = fmaf(p.y, v1.w, o[3]);
                                o[0] = fmaf(p.z, v2.x, o[0]); o[1] = fmaf(p.z, v2.y, o[1]);
                                o[2] = fmaf(p.z, v2.z, o[2]); o[3] = fmaf(p.z, v2.w, o[3]);
                                o[0] = fmaf(p.w, v3.x, o[0]); o[1] = fmaf(p.w, v3.y, o[1]);
                                o[2] = fmaf(p.w, v3.z, o[2]); o[3] = fmaf(p.w, v3.w, o[3]);
                            }
                        }
                    }
                }
            }
        }
        __syncthreads();  // the stage is refilled by the next iteration's load
    }

    if (warp >= group) return;
#pragma unroll
    for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
        const int32_t g = warp + hh * kDecWarps;
        if (g >= group) continue;
        const int64_t head = int64_t(row) * n_heads + head0 + g;
        if (a.num_splits == 1) {
            const float inv = 1.0f / l[hh];
            float* o = a.out + head * hd;
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
                const int32_t c = lane + cc * 32;
                if (c < c4)
                    *reinterpret_cast<float4*>(o + c * 4) =
                        make_float4(acc[hh][cc][0] * inv, acc[hh][cc][1] * inv, acc[hh][cc][2] * inv, acc[hh][cc][3] * inv);
            }
        } else {
            const int64_t part = head * a.num_splits + split;
            float* o = a.part_o + part * hd;
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
                const int32_t c = lane + cc * 32;
                if (c < c4)
                    *reinterpret_cast<float4*>(o + c * 4) =
                        make_float4(acc[hh][cc][0], acc[hh][cc][1], acc[hh][cc][2], acc[hh][cc][3]);
            }
            if (lane == 0) {
                a.part_ml[part * 2] = m[hh];
                a.part_ml[part * 2 + 1] = l[hh];
            }
        }
    }
}

constexpr int kCombineThreads = kMaxHeadDim / 4;  // a float4 column each

// One block per (row, head): out = sum_s w_s acc_s / sum_s w_s l_s, w_s = exp(m_s - max m), in split order.
// With a.out8, also out's int8 copy: a head of a multiple of 128 columns is
// whole warps of active lanes, and its groups of 32 start on 8-lane boundaries.
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(DecodeArgs a) {
    pdl_wait();
    const int64_t head = blockIdx.x;
    const int32_t hd = a.heads.head_dim, c = threadIdx.x, splits = a.num_splits;
    const float* ml = a.part_ml + head * splits * 2;
    float m_max = -INFINITY;
    for (int32_t s = 0; s < splits; ++s) m_max = fmaxf(m_max, ml[2 * s]);
    float total = 0.0f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const bool active = c < hd / 4;
    for (int32_t s = 0; s < splits; ++s) {
        const float ms = ml[2 * s];
        if (ms == -INFINITY) continue;  // an empty split: its acc was never written
        const float w = expf(ms - m_max);
        total = fmaf(w, ml[2 * s + 1], total);
        if (active) {
            const float4 p = *reinterpret_cast<const float4*>(a.part_o + (head * splits + s) * hd + c * 4);
            acc.x = fmaf(w, p.x, acc.x);
            acc.y = fmaf(w, p.y, acc.y);
            acc.z = fmaf(w, p.z, acc.z);
            acc.w = fmaf(w, p.w, acc.w);
        }
    }
    if (active) {
        const float inv = 1.0f / total;
        const float4 y = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
        *reinterpret_cast<float4*>(a.out + head * hd + c * 4) = y;
        if (a.out8.q) store_int8_quad(y, head * (hd / 4) + c, a.out8);
    }
}

// ---- decode over a bf16 pool (tensor cores) ------------------------------------------
//
// decode_kernel's blocking (one block per (row, kv head, split), partials merged
// by combine_kernel) with the scores and P V on bf16 m16n8k16 tensor cores. The
// GQA group's heads are the 16 rows of the A operand (4 of 16 used for a group
// of 4: the tensor cores have throughput to spare; what counts is the
// instruction count, which held the scalar kernel at 56% of the SM's issue
// rate and 20% of HBM bandwidth). The block copies tiles of 64 keys; warp w
// takes keys 16w..16w+15 of each with its own online softmax, and the four
// warps' (m, l, O) merge in shared memory at the end. K and V fragments come
// from ldmatrix (.trans for V, whose rows are keys). Q is split into two bf16
// parts, hi = bf16(q) and lo = bf16(q - hi), and S = hi K^T + lo K^T: the pool's
// K is bf16 already, so the scores are those of fp32 Q to ~2^-16. Rounding Q
// alone (as prefill_bf16_kernel does) errs by ~2^-9 of each score, and a
// trained model's decode scores reach tens: the softmax moved enough to change
// stories260K's greedy tokens against the CPU. P is rounded to bf16 (it lies
// in [0, 1]; its error is relative, not scaled by the scores).
constexpr int kDecMmaKeys = 64;                           // keys per tile
constexpr int kDecMmaWarpKeys = kDecMmaKeys / kDecWarps;  // 16: two n-fragments of S, one k-step of P V


// Rows of Q, K and V are hd16 + 8 bf16: 16-byte aligned for cp.async and
// ldmatrix, and 8 rows at that stride fall on distinct banks. Q keeps only the
// group's rows (hi, then lo) and one row of zeros, which the A operand's other
// rows point at: 72 KB a block at head_dim 128 and a group of 4, three blocks
// an SM (16 rows of each part would be 78 KB, and two). After the loop the same
// memory holds the warps' partial outputs for the merge.
size_t decode_bf16_smem_bytes(HeadShape heads) {
    const size_t ld = size_t((heads.head_dim + 15) / 16 * 16 + 8);
    const size_t group = size_t(heads.n_heads / heads.n_kv_heads);
    const size_t tiles = sizeof(bf16) * ld * (2 * group + 1 + 2 * 2 * kDecMmaKeys);
    const size_t merge = sizeof(float) * kDecWarps * group * (size_t(heads.head_dim) + 2);
    return std::max(tiles, merge);
}

// HDP: head_dim rounded up to 16 is at most HDP (64, 128 or 256).
template <int HDP>
__global__ void __launch_bounds__(kDecThreads) decode_bf16_kernel(DeviceStep st, const float* __restrict__ q,
                                                                  const bf16* __restrict__ k_pool,
                                                                  const bf16* __restrict__ v_pool, DecodeArgs a) {
    pdl_wait();
    constexpr int kOFrag = HDP / 8, kNFrag = kDecMmaWarpKeys / 8;
    extern __shared__ float4 dec16_smem4[];
    const int32_t row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    const int32_t hd = a.heads.head_dim, hd16 = (hd + 15) / 16 * 16, ld = hd16 + 8, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size, head0 = kvh * group;
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4, t4 = lane % 4;
    bf16* q_s = reinterpret_cast<bf16*>(dec16_smem4);  // [group][ld] bf16(q), [group][ld] bf16(q - bf16(q)), [ld] zeros
    bf16* k_s = q_s + (2 * group + 1) * ld;             // [2][kDecMmaKeys][ld]
    bf16* v_s = k_s + 2 * kDecMmaKeys * ld;             // [2][kDecMmaKeys][ld]

    int32_t lo, hi;
    if (!decode_split_keys(st, a, row, split, head0, group, lo, hi)) return;

    const KvTileSource src{st.block_tables + int64_t(st.row_seq[row]) * st.max_blocks_per_seq, bs,
                           int64_t(a.heads.n_kv_heads) * hd, kvh, hd, hd16, hi};
    auto load_tile = [&](int stage, int32_t t0) {
        load_kv_tile<kDecMmaKeys, kDecThreads>(src, k_pool, v_pool, t0, k_s + stage * kDecMmaKeys * ld, v_s + stage * kDecMmaKeys * ld, ld);
    };

    const int32_t ntiles = (hi - lo + kDecMmaKeys) / kDecMmaKeys;
    load_tile(0, lo);
    cp_async_commit();
    // Q: row r of the A operand is head head0 + r, as hi + lo; rows past the
    // group read the zero row, and columns past head_dim are zeros.
    const int32_t pairs16 = hd16 / 2;
    for (int32_t i = threadIdx.x; i < (group + 1) * pairs16; i += kDecThreads) {
        const int32_t r = i / pairs16, c = 2 * (i - r * pairs16);
        if (r == group) {
            *reinterpret_cast<uint32_t*>(q_s + 2 * group * ld + c) = 0u;
            continue;
        }
        float2 x = make_float2(0.0f, 0.0f);
        if (c < hd) x = *reinterpret_cast<const float2*>(q + (int64_t(row) * n_heads + head0 + r) * hd + c);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(x.x, x.y);
        *reinterpret_cast<__nv_bfloat162*>(q_s + r * ld + c) = hi;
        *reinterpret_cast<uint32_t*>(q_s + (group + r) * ld + c) =
            pack_bf16(x.x - __low2float(hi), x.y - __high2float(hi));
    }

    // Every row of the fragment is the same query: keys lo..hi are its keys in this split.
    PrefillRows rows{};
    rows.pos[0] = rows.pos[1] = hi;
    rows.first[0] = rows.first[1] = lo;
    float o[kOFrag][4];
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    // ldmatrix row addresses: lane j points at row j % 8 of matrix j / 8.
    const int32_t q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_dim = (lane >> 4) * 8;  // Q: heads x dims
    const bf16* q_hi = q_s + (q_row < group ? q_row : 2 * group) * ld + q_dim;
    const bf16* q_lo = q_s + (q_row < group ? group + q_row : 2 * group) * ld + q_dim;
    const int32_t k_key = (lane & 7) + (lane >> 4) * 8, k_dim = ((lane >> 3) & 1) * 8;  // K: keys x dims
    const int32_t v_key = (lane & 7) + ((lane >> 3) & 1) * 8, v_dim = (lane >> 4) * 8;  // V: keys x dims, transposed

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kDecMmaKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kDecMmaKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const int32_t w0 = t0 + warp * kDecMmaWarpKeys;  // the warp's first key
        if (w0 <= hi) {                                   // warp-uniform
            const bf16* ks = k_s + ((it & 1) * kDecMmaKeys + warp * kDecMmaWarpKeys) * ld;
            const bf16* vs = v_s + ((it & 1) * kDecMmaKeys + warp * kDecMmaWarpKeys) * ld;
            // S = Q K^T: 16 heads x 16 keys; one ldmatrix.x4 gives both n-fragments' B.
            float s[kNFrag][4] = {};
#pragma unroll
            for (int kb = 0; kb < HDP / 16; ++kb) {
                if (kb * 16 < hd16) {
                    uint32_t kf[4];
                    ldmatrix_x4(kf, ks + k_key * ld + kb * 16 + k_dim);
#pragma unroll
                    for (int part = 0; part < 2; ++part) {  // hi, then lo
                        uint32_t af[4];
                        ldmatrix_x4(af, (part ? q_lo : q_hi) + kb * 16);
                        mma_bf16(s[0], af, kf[0], kf[1]);
                        mma_bf16(s[1], af, kf[2], kf[3]);
                    }
                }
            }
            online_softmax(s, o, m, l, rows, w0, t4, a.scale);
            // O += P V: P's A fragment is S's accumulator; one ldmatrix.x4.trans
            // gives the B of two n-fragments (16 dims).
            const uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]),
                                    pack_bf16(s[1][0], s[1][1]), pack_bf16(s[1][2], s[1][3])};
#pragma unroll
            for (int f = 0; f < kOFrag; f += 2) {
                if (f * 8 >= hd16) continue;
                uint32_t vf[4];
                ldmatrix_x4_trans(vf, vs + v_key * ld + f * 8 + v_dim);
                // A fresh accumulator per tile, added in fp32 (see prefill_kernel).
                float t0o[4] = {}, t1o[4] = {};
                mma_bf16(t0o, pa, vf[0], vf[1]);
                mma_bf16(t1o, pa, vf[2], vf[3]);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    o[f][e] += t0o[e];
                    o[f + 1][e] += t1o[e];
                }
            }
        }
        __syncthreads();  // the stage is refilled by the next iteration's load
    }

    // Merge the warps: each writes its rows' m, l and unnormalised O, then the
    // block combines them per (head, column) like combine_kernel does splits.
    float* o_s = reinterpret_cast<float*>(dec16_smem4);  // [kDecWarps][group][hd]
    float* ml_s = o_s + kDecWarps * group * hd;          // [kDecWarps][group][2]
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int32_t r = g8 + 8 * i;
        if (r >= group) continue;
        float* orow = o_s + (warp * group + r) * hd;
#pragma unroll
        for (int f = 0; f < kOFrag; ++f) {
            const int32_t col = f * 8 + 2 * t4;
            if (col < hd) *reinterpret_cast<float2*>(orow + col) = make_float2(o[f][2 * i], o[f][2 * i + 1]);
        }
        if (t4 == 0) {
            ml_s[(warp * group + r) * 2] = m[i];
            ml_s[(warp * group + r) * 2 + 1] = l[i];
        }
    }
    __syncthreads();
    for (int32_t idx = threadIdx.x; idx < group * hd; idx += kDecThreads) {
        const int32_t r = idx / hd, c = idx - r * hd;
        float m_max = -INFINITY;
        for (int w = 0; w < kDecWarps; ++w) m_max = fmaxf(m_max, ml_s[(w * group + r) * 2]);
        float sum_l = 0.0f, sum_o = 0.0f;
        for (int w = 0; w < kDecWarps; ++w) {
            const float mw = ml_s[(w * group + r) * 2];
            if (mw == -INFINITY) continue;  // a warp that saw none of the keys
            const float e = expf(mw - m_max);
            sum_l += e * ml_s[(w * group + r) * 2 + 1];
            sum_o += e * o_s[(w * group + r) * hd + c];
        }
        const int64_t head = int64_t(row) * n_heads + head0 + r;
        if (a.num_splits == 1) {
            a.out[head * hd + c] = sum_o / sum_l;
        } else {
            const int64_t part = head * a.num_splits + split;
            a.part_o[part * hd + c] = sum_o;
            if (c == 0) {
                a.part_ml[part * 2] = m_max;
                a.part_ml[part * 2 + 1] = sum_l;
            }
        }
    }
}

bool use_decode(const DeviceStep& st, HeadShape heads) {
    return st.num_tokens == st.num_seqs && heads.n_heads / heads.n_kv_heads <= kDecMaxGroup;
}

template <int HDP>
void launch_decode_bf16(const DeviceStep& st, const float* q, const bf16* k_pool, const bf16* v_pool,
                        HeadShape heads, const DecodeArgs& a, dim3 grid, cudaStream_t stream) {
    static size_t allowed = 0;
    const size_t smem = decode_bf16_smem_bytes(heads);
    allow_smem(decode_bf16_kernel<HDP>, smem, allowed);
    launch_pdl(decode_bf16_kernel<HDP>, grid, kDecThreads, smem, stream, st, q, k_pool, v_pool, a);
}

template <class T>
bool launch_decode(const DeviceStep& st, const float* q, const T* k_pool, const T* v_pool, HeadShape heads,
                   float scale, int32_t window, float* out, void* out8, bool& wrote8, void* workspace,
                   size_t workspace_bytes, bool decode_mma, cudaStream_t stream) {
    const DecodePlan p = decode_plan(st, heads);
    const size_t need = paged_attention_workspace_bytes(st, heads);
    if (!(need <= workspace_bytes && (need == 0 || workspace))) return false;
    DecodeArgs a{heads, scale, window, p.split_len, p.num_splits, nullptr, nullptr, out, {}};
    if (p.num_splits > 1) {
        a.part_o = static_cast<float*>(workspace);
        a.part_ml = a.part_o + size_t(st.num_tokens) * heads.n_heads * p.num_splits * heads.head_dim;
        wrote8 = out8 && heads.head_dim % 128 == 0;
        if (wrote8) a.out8 = int8_act_parts(out8, st.num_tokens, heads.n_heads * heads.head_dim);
    }
    const dim3 grid(st.num_tokens, heads.n_kv_heads, p.num_splits);
    bool done = false;
    if constexpr (std::is_same_v<T, bf16>) {  // bf16 tensor cores
        // decode_mma false (MINFER_DECODE_MMA=0): the scalar decode_kernel instead of
        // decode_bf16_kernel (to measure one against the other).
        if (decode_mma) {
            const int32_t hd16 = (heads.head_dim + 15) / 16 * 16;
            if (hd16 <= 64)
                launch_decode_bf16<64>(st, q, k_pool, v_pool, heads, a, grid, stream);
            else if (hd16 <= 128)
                launch_decode_bf16<128>(st, q, k_pool, v_pool, heads, a, grid, stream);
            else
                launch_decode_bf16<256>(st, q, k_pool, v_pool, heads, a, grid, stream);
            done = true;
        }
    }
    if (!done) {
        static size_t allowed = 0;
        const size_t smem = decode_smem_bytes<T>(heads);
        allow_smem(decode_kernel<T>, smem, allowed);
        launch_pdl(decode_kernel<T>, grid, kDecThreads, smem, stream, st, q, k_pool, v_pool, a);
    }
    if (p.num_splits > 1) {
        launch_pdl(combine_kernel, st.num_tokens * heads.n_heads, kCombineThreads, 0, stream, a);
    }
    return true;
}

}  // namespace

bool decode_attention_usable(const DeviceStep& st, HeadShape heads) { return use_decode(st, heads); }

size_t paged_attention_workspace_bytes(const DeviceStep& st, HeadShape heads) {
    if (st.num_tokens == 0 || heads.n_kv_heads <= 0 || !use_decode(st, heads)) return 0;
    const DecodePlan p = decode_plan(st, heads);
    if (p.num_splits <= 1) return 0;
    return sizeof(float) * size_t(st.num_tokens) * heads.n_heads * p.num_splits * size_t(heads.head_dim + 2);
}

bool launch_decode_attention(const DeviceStep& st, const float* q, const float* k_pool, const float* v_pool,
                             HeadShape heads, float scale, int32_t window, float* out, void* out8, bool& wrote8,
                             void* workspace, size_t workspace_bytes, bool decode_mma, cudaStream_t stream) {
    return launch_decode(st, q, k_pool, v_pool, heads, scale, window, out, out8, wrote8, workspace, workspace_bytes,
                         decode_mma, stream);
}
bool launch_decode_attention(const DeviceStep& st, const float* q, const bf16* k_pool, const bf16* v_pool,
                             HeadShape heads, float scale, int32_t window, float* out, void* out8, bool& wrote8,
                             void* workspace, size_t workspace_bytes, bool decode_mma, cudaStream_t stream) {
    return launch_decode(st, q, k_pool, v_pool, heads, scale, window, out, out8, wrote8, workspace, workspace_bytes,
                         decode_mma, stream);
}

}  // namespace minfer::cuda
