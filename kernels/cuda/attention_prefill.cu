// Paged attention for prefill chunks and mixed steps on tensor cores
// (FlashAttention-2 style); attention.cu's dispatch takes it for steps with
// attention tiles when the head dim and pointers allow 16-byte copies.
//
// prefill_kernel (a float32 pool): mma.sync m16n8k8 tf32, 3xTF32 split so the
// products are near fp32. One block per (tile of <= kAttnTileRows rows of one
// sequence, kv head, chunk): the tile's (row, q head of the group) pairs are
// packed 64 to a chunk, a warp owning 16 of them; K/V tiles of 32 keys are
// double-buffered in shared memory; S = Q K^T and O += P V stay in registers
// with causal/window masks per row. prefill_bf16_kernel (a bf16 pool): the same
// blocking with bf16 m16n8k16 products (Q and P rounded to bf16).
//
// The two kernels keep separate tile loops. They share the rows' bookkeeping
// (prefill_rows), the softmax (online_softmax) and the output store
// (store_prefill_output); the rest of each step differs: shared-memory layout
// (Q as floats against bf16), the K/V tile copy, the fragment loads (scalar
// loads split into tf32 parts against ldmatrix) and the MMA shape (m16n8k8
// against m16n8k16).
#include "kernels/cuda/attention_common.cuh"

namespace minfer::cuda {

namespace {

// ---- prefill kernel (tensor cores, 3xTF32) -------------------------------------------

constexpr int kPreThreads = 128;
constexpr int kPreWarps = kPreThreads / 32;
constexpr int kPreVecs = 16 * kPreWarps;  // (row, head) pairs per block: 16 per warp (one m16 fragment)
constexpr int kPreKeys = 32;              // keys per K/V tile
constexpr int kPreNFrag = kPreKeys / 8;

// Shared memory rows of Q are hd8 + 4 floats (hd8 = head_dim rounded up to 8):
// a stride of 4 mod 8 words makes the fragment loads conflict-free. K and V
// rows are hd8 + one 16-byte copy of pool elements.
template <class T>
size_t prefill_smem_bytes(HeadShape heads) {
    const size_t hd8 = size_t((heads.head_dim + 7) / 8 * 8);
    return sizeof(float) * (hd8 + 4) * kPreVecs + sizeof(T) * (hd8 + kPerCopy<T>) * 2 * 2 * kPreKeys;
}

struct PrefillArgs {
    HeadShape heads;
    float scale;
    int32_t window;
    float* out;
};

// The two fragment rows of this thread in a prefill block (vectors warp*16 + g8
// and + 8), as PrefillRows (attention_common.cuh). range_s: 2 ints of shared
// memory; every thread of the block must call this.
__device__ __forceinline__ PrefillRows prefill_rows(const DeviceStep& st, int32_t window, int32_t row0, int32_t vec0,
                                                    int32_t nvec, int32_t group, int32_t* range_s) {
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4;
    PrefillRows r;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int32_t v = warp * 16 + g8 + i * 8;
        if (v < nvec) {
            r.pos[i] = st.positions[row0 + (vec0 + v) / group];
            r.first[i] = window_first(r.pos[i], window);
        } else {
            r.pos[i] = -1;  // no key is <= -1: the row is fully masked
            r.first[i] = INT32_MAX;
        }
    }
    r.w_lo = min(r.first[0], r.first[1]);
    r.w_hi = max(r.pos[0], r.pos[1]);
    for (int offset = 16; offset > 0; offset /= 2) {
        r.w_lo = min(r.w_lo, __shfl_xor_sync(0xffffffffu, r.w_lo, offset));
        r.w_hi = max(r.w_hi, __shfl_xor_sync(0xffffffffu, r.w_hi, offset));
    }
    if (threadIdx.x == 0) {
        range_s[0] = INT32_MAX;
        range_s[1] = -1;
    }
    __syncthreads();
    if (lane == 0) {
        atomicMin(&range_s[0], r.w_lo);
        atomicMax(&range_s[1], r.w_hi);
    }
    __syncthreads();
    r.lo = range_s[0];
    r.hi = range_s[1];
    return r;
}

// O / l into the output rows: element e of fragment f is row g8 + 8*(e/2),
// column f*8 + 2*t4 + (e&1).
template <int kOFrag>
__device__ __forceinline__ void store_prefill_output(const float (&o)[kOFrag][4], const float (&l)[2],
                                                     const PrefillArgs& a, int32_t row0, int32_t vec0, int32_t nvec,
                                                     int32_t group, int32_t kvh) {
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4, t4 = lane % 4;
    const int32_t hd = a.heads.head_dim;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int32_t v = warp * 16 + g8 + i * 8;
        if (v >= nvec) continue;
        const int32_t pv = vec0 + v, r = row0 + pv / group, g = pv % group;
        float* out = a.out + (int64_t(r) * a.heads.n_heads + kvh * group + g) * hd;
        const float inv = 1.0f / l[i];
#pragma unroll
        for (int f = 0; f < kOFrag; ++f) {
            const int32_t col = f * 8 + 2 * t4;
            if (col < hd) *reinterpret_cast<float2*>(out + col) = make_float2(o[f][2 * i] * inv, o[f][2 * i + 1] * inv);
        }
    }
}

// HDP: head_dim rounded up to 8 is at most HDP (64, 128 or 256): the register arrays' size.
template <int HDP, class T>
__global__ void __launch_bounds__(kPreThreads) prefill_kernel(DeviceStep st, const float* __restrict__ q,
                                                              const T* __restrict__ k_pool,
                                                              const T* __restrict__ v_pool, PrefillArgs a) {
    pdl_wait();
    constexpr int kOFrag = HDP / 8, E = kPerCopy<T>;
    extern __shared__ float4 pre_smem4[];
    __shared__ int32_t range_s[2];
    const int32_t tile = blockIdx.x, kvh = blockIdx.y, chunk = blockIdx.z;
    const int32_t hd = a.heads.head_dim, hd8 = (hd + 7) / 8 * 8, ld = hd8 + 4, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size;
    const int32_t seq = st.attn_tiles[3 * tile], row0 = st.attn_tiles[3 * tile + 1], count = st.attn_tiles[3 * tile + 2];
    const int32_t vec0 = chunk * kPreVecs;
    if (vec0 >= count * group) return;
    const int32_t nvec = min(kPreVecs, count * group - vec0);
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4, t4 = lane % 4;
    const int32_t ldt = hd8 + E;                        // K/V rows, in pool elements
    float* q_s = reinterpret_cast<float*>(pre_smem4);  // [kPreVecs][ld]
    T* k_s = reinterpret_cast<T*>(q_s + kPreVecs * ld);  // [2][kPreKeys][ldt]
    T* v_s = k_s + 2 * kPreKeys * ldt;                   // [2][kPreKeys][ldt]

    const PrefillRows rows = prefill_rows(st, a.window, row0, vec0, nvec, group, range_s);
    const int32_t lo = rows.lo, hi = rows.hi;

    const int64_t kv_row = int64_t(a.heads.n_kv_heads) * hd;
    const int32_t* table = st.block_tables + int64_t(seq) * st.max_blocks_per_seq;
    const int32_t c8 = hd8 / 4, c4 = hd / 4;
    // 16-byte copies per key row: those past head_dim (up to hd8) are zero-filled.
    const int32_t copies8 = hd8 / E, copies = hd / E;
    auto load_tile = [&](int stage, int32_t t0) {
        T* ks = k_s + stage * kPreKeys * ldt;
        T* vs = v_s + stage * kPreKeys * ldt;
        for (int32_t i = threadIdx.x; i < kPreKeys * copies8; i += kPreThreads) {
            const int32_t key = i / copies8, c = i - key * copies8, t = t0 + key;
            const bool ok = t <= hi && c < copies;
            int64_t off = 0;
            if (ok) off = (int64_t(table[t / bs]) * bs + t % bs) * kv_row + int64_t(kvh) * hd + c * E;
            cp_async16(ks + key * ldt + c * E, k_pool + off, ok);
            cp_async16(vs + key * ldt + c * E, v_pool + off, ok);
        }
    };

    const int32_t ntiles = (hi - lo + kPreKeys) / kPreKeys;
    load_tile(0, lo);
    cp_async_commit();
    // Q: vector v = (row (vec0+v)/group, head (vec0+v)%group); zeros past nvec and past hd.
    for (int32_t i = threadIdx.x; i < kPreVecs * c8; i += kPreThreads) {
        const int32_t v = i / c8, c = i - v * c8;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (v < nvec && c < c4) {
            const int32_t pv = vec0 + v, r = row0 + pv / group, g = pv % group;
            x = *reinterpret_cast<const float4*>(q + (int64_t(r) * n_heads + kvh * group + g) * hd + c * 4);
        }
        *reinterpret_cast<float4*>(q_s + v * ld + c * 4) = x;
    }

    float o[kOFrag][4];
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const float* qw = q_s + warp * 16 * ld;

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kPreKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kPreKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const T* ks = k_s + (it & 1) * kPreKeys * ldt;
        const T* vs = v_s + (it & 1) * kPreKeys * ldt;

        if (t0 <= rows.w_hi && t0 + kPreKeys - 1 >= rows.w_lo) {  // warp-uniform
            // S = Q K^T: 16 x 32 per warp.
            float s[kPreNFrag][4];
#pragma unroll
            for (int f = 0; f < kPreNFrag; ++f) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.0f;
#pragma unroll
            for (int kb = 0; kb < HDP / 8; ++kb) {
                if (kb * 8 < hd8) {
                    const float* qa = qw + kb * 8 + t4;
                    const float af[4] = {qa[g8 * ld], qa[(g8 + 8) * ld], qa[g8 * ld + 4], qa[(g8 + 8) * ld + 4]};
#pragma unroll
                    for (int f = 0; f < kPreNFrag; ++f) {
                        const T* kb_ = ks + (f * 8 + g8) * ldt + kb * 8 + t4;
                        mma_3xtf32(s[f], af, widen(kb_[0]), widen(kb_[4]));
                    }
                }
            }
            online_softmax(s, o, m, l, rows, t0, t4, a.scale);
            // O += P V. The accumulator layout of S (columns 2t, 2t+1) becomes
            // the A layout (columns t, t+4) by reading keys in the order
            // 0,2,4,6,1,3,5,7 within each 8: A's column t is key 2t, column t+4
            // is key 2t+1, and V's B rows follow the same order.
            // Each tile's P V goes into a fresh accumulator added to O with an
            // fp32 add: the tensor cores' own accumulation truncates, which
            // over thousands of keys would add up to a bias (~1e-5).
#pragma unroll
            for (int f = 0; f < kOFrag; ++f) {
                if (f * 8 >= hd8) continue;
                float tile_o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int kb = 0; kb < kPreNFrag; ++kb) {
                    const float pa[4] = {s[kb][0], s[kb][2], s[kb][1], s[kb][3]};
                    const T* vb = vs + (kb * 8 + 2 * t4) * ldt + g8 + f * 8;
                    mma_3xtf32(tile_o, pa, widen(vb[0]), widen(vb[ldt]));
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) o[f][e] += tile_o[e];
            }
        }
        __syncthreads();
    }

    store_prefill_output(o, l, a, row0, vec0, nvec, group, kvh);
}


// ---- prefill over a bf16 pool (tensor cores, bf16 m16n8k16) ---------------------------
//
// The same blocking as prefill_kernel, with the operands the pool already holds:
// K and V are bf16, Q is rounded to bf16 as it is staged, and P is rounded to
// bf16 before P V (as FlashAttention-2 does); the products accumulate in fp32.
// One m16n8k16 does the work of six m16n8k8 tf32 of the 3xTF32 kernel. The
// accumulator of S (row g8, keys 2t4 and 2t4 + 1 of each 8) is already the A
// fragment of P V (rows g8 / g8 + 8, keys 2t4, 2t4 + 1 and + 8, + 9 of each 16),
// so P never leaves the registers.


// Rows of Q, K and V in shared memory are hd16 + 8 bf16 (hd16 = head_dim rounded up
// to 16; the padding keeps rows 16-byte aligned for cp.async).
size_t prefill_bf16_smem_bytes(HeadShape heads) {
    const size_t ld = size_t((heads.head_dim + 15) / 16 * 16 + 8);
    return sizeof(bf16) * ld * (kPreVecs + 2 * 2 * kPreKeys);
}

// HDP: head_dim rounded up to 16 is at most HDP (64, 128 or 256).
template <int HDP>
__global__ void __launch_bounds__(kPreThreads) prefill_bf16_kernel(DeviceStep st, const float* __restrict__ q,
                                                                   const bf16* __restrict__ k_pool,
                                                                   const bf16* __restrict__ v_pool, PrefillArgs a) {
    pdl_wait();
    constexpr int kOFrag = HDP / 8;
    extern __shared__ float4 pre16_smem4[];
    __shared__ int32_t range_s[2];
    const int32_t tile = blockIdx.x, kvh = blockIdx.y, chunk = blockIdx.z;
    const int32_t hd = a.heads.head_dim, hd16 = (hd + 15) / 16 * 16, ld = hd16 + 8, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size;
    const int32_t seq = st.attn_tiles[3 * tile], row0 = st.attn_tiles[3 * tile + 1], count = st.attn_tiles[3 * tile + 2];
    const int32_t vec0 = chunk * kPreVecs;
    if (vec0 >= count * group) return;
    const int32_t nvec = min(kPreVecs, count * group - vec0);
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, t4 = lane % 4;
    bf16* q_s = reinterpret_cast<bf16*>(pre16_smem4);  // [kPreVecs][ld]
    bf16* k_s = q_s + kPreVecs * ld;                    // [2][kPreKeys][ld]
    bf16* v_s = k_s + 2 * kPreKeys * ld;                // [2][kPreKeys][ld]

    const PrefillRows rows = prefill_rows(st, a.window, row0, vec0, nvec, group, range_s);
    const int32_t lo = rows.lo, hi = rows.hi;

    const KvTileSource src{st.block_tables + int64_t(seq) * st.max_blocks_per_seq, bs,
                           int64_t(a.heads.n_kv_heads) * hd, kvh, hd, hd16, hi};
    auto load_tile = [&](int stage, int32_t t0) {
        load_kv_tile_bf16<kPreKeys, kPreThreads>(src, k_pool, v_pool, t0, k_s + stage * kPreKeys * ld, v_s + stage * kPreKeys * ld, ld);
    };

    const int32_t ntiles = (hi - lo + kPreKeys) / kPreKeys;
    load_tile(0, lo);
    cp_async_commit();
    // Q, rounded to bf16: vector v = (row (vec0+v)/group, head (vec0+v)%group); zeros past nvec and head_dim.
    const int32_t pairs16 = hd16 / 2;
    for (int32_t i = threadIdx.x; i < kPreVecs * pairs16; i += kPreThreads) {
        const int32_t v = i / pairs16, c = 2 * (i - v * pairs16);
        float x0 = 0.0f, x1 = 0.0f;
        if (v < nvec && c < hd) {  // head_dim is a multiple of 8: both or neither
            const int32_t pv = vec0 + v, r = row0 + pv / group, g = pv % group;
            const float2 x = *reinterpret_cast<const float2*>(q + (int64_t(r) * n_heads + kvh * group + g) * hd + c);
            x0 = x.x, x1 = x.y;
        }
        *reinterpret_cast<uint32_t*>(q_s + v * ld + c) = pack_bf16(x0, x1);
    }

    float o[kOFrag][4];
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    // ldmatrix row addresses (lane j: row j % 8 of matrix j / 8), as in decode_bf16_kernel.
    const int32_t q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_dim = (lane >> 4) * 8;  // Q: (row, head) pairs x dims
    const int32_t k_key = (lane & 7) + (lane >> 4) * 8, k_dim = ((lane >> 3) & 1) * 8;  // K: keys x dims
    const int32_t v_key = (lane & 7) + ((lane >> 3) & 1) * 8, v_dim = (lane >> 4) * 8;  // V: keys x dims, transposed
    const bf16* qw = q_s + (warp * 16 + q_row) * ld + q_dim;
    // The warp's Q fragments stay in registers for every tile up to head_dim 128
    // (32 registers); at 256 they are reloaded per tile.
    constexpr bool kQInRegs = HDP <= 128;
    uint32_t qf[kQInRegs ? HDP / 16 : 1][4];
    if constexpr (kQInRegs) {
        __syncthreads();
#pragma unroll
        for (int kb = 0; kb < HDP / 16; ++kb)
            if (kb * 16 < hd16) ldmatrix_x4(qf[kb], qw + kb * 16);
    }

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kPreKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kPreKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16* ks = k_s + (it & 1) * kPreKeys * ld;
        const bf16* vs = v_s + (it & 1) * kPreKeys * ld;

        if (t0 <= rows.w_hi && t0 + kPreKeys - 1 >= rows.w_lo) {  // warp-uniform
            // S = Q K^T: 16 x 32 per warp, 16 dims per mma; one ldmatrix.x4 gives
            // the B of two n-fragments (16 keys).
            float s[kPreNFrag][4];
#pragma unroll
            for (int f = 0; f < kPreNFrag; ++f) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.0f;
#pragma unroll
            for (int kb = 0; kb < HDP / 16; ++kb) {
                if (kb * 16 < hd16) {
                    uint32_t af[4];
                    if constexpr (kQInRegs) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) af[e] = qf[kb][e];
                    } else {
                        ldmatrix_x4(af, qw + kb * 16);
                    }
#pragma unroll
                    for (int f = 0; f < kPreNFrag; f += 2) {
                        uint32_t kf[4];
                        ldmatrix_x4(kf, ks + (f * 8 + k_key) * ld + kb * 16 + k_dim);
                        mma_bf16(s[f], af, kf[0], kf[1]);
                        mma_bf16(s[f + 1], af, kf[2], kf[3]);
                    }
                }
            }
            online_softmax(s, o, m, l, rows, t0, t4, a.scale);
            // O += P V, 16 keys per mma: P's A fragment is S's accumulator, two n-frags of keys.
            uint32_t pa[kPreKeys / 16][4];
#pragma unroll
            for (int kc = 0; kc < kPreKeys / 16; ++kc) {
                pa[kc][0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
                pa[kc][1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
                pa[kc][2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
                pa[kc][3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
            }
            // One ldmatrix.x4.trans gives V's B for 16 keys and two n-fragments (16 dims).
#pragma unroll
            for (int f = 0; f < kOFrag; f += 2) {
                if (f * 8 >= hd16) continue;
                float t0o[4] = {0.0f, 0.0f, 0.0f, 0.0f}, t1o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int kc = 0; kc < kPreKeys / 16; ++kc) {
                    uint32_t vf[4];
                    ldmatrix_x4_trans(vf, vs + (kc * 16 + v_key) * ld + f * 8 + v_dim);
                    mma_bf16(t0o, pa[kc], vf[0], vf[1]);
                    mma_bf16(t1o, pa[kc], vf[2], vf[3]);
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    o[f][e] += t0o[e];
                    o[f + 1][e] += t1o[e];
                }
            }
        }
        __syncthreads();
    }

    store_prefill_output(o, l, a, row0, vec0, nvec, group, kvh);
}

template <int HDP, class T>
void launch_prefill(const DeviceStep& st, const float* q, const T* k_pool, const T* v_pool, HeadShape heads,
                    float scale, int32_t window, float* out, cudaStream_t stream) {
    static size_t allowed = 0;
    const size_t smem = prefill_smem_bytes<T>(heads);
    allow_smem(prefill_kernel<HDP, T>, smem, allowed);
    const int32_t group = heads.n_heads / heads.n_kv_heads;
    const dim3 grid(st.num_attn_tiles, heads.n_kv_heads, (kAttnTileRows * group + kPreVecs - 1) / kPreVecs);
    launch_pdl(prefill_kernel<HDP, T>, grid, kPreThreads, smem, stream, st, q, k_pool, v_pool,
                                                                PrefillArgs{heads, scale, window, out});
}

template <int HDP>
void launch_prefill_bf16(const DeviceStep& st, const float* q, const bf16* k_pool, const bf16* v_pool, HeadShape heads,
                         float scale, int32_t window, float* out, cudaStream_t stream) {
    static size_t allowed = 0;
    const size_t smem = prefill_bf16_smem_bytes(heads);
    allow_smem(prefill_bf16_kernel<HDP>, smem, allowed);
    const int32_t group = heads.n_heads / heads.n_kv_heads;
    const dim3 grid(st.num_attn_tiles, heads.n_kv_heads, (kAttnTileRows * group + kPreVecs - 1) / kPreVecs);
    launch_pdl(prefill_bf16_kernel<HDP>, grid, kPreThreads, smem, stream, st, q, k_pool, v_pool,
                                                                  PrefillArgs{heads, scale, window, out});
}

}  // namespace

void launch_prefill_attention(const DeviceStep& st, const float* q, const float* k_pool, const float* v_pool,
                              HeadShape heads, float scale, int32_t window, float* out, cudaStream_t stream) {
    const int32_t hd8 = (heads.head_dim + 7) / 8 * 8;
    if (hd8 <= 64)
        launch_prefill<64>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
    else if (hd8 <= 128)
        launch_prefill<128>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
    else
        launch_prefill<256>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
}
void launch_prefill_attention(const DeviceStep& st, const float* q, const bf16* k_pool, const bf16* v_pool,
                              HeadShape heads, float scale, int32_t window, float* out, cudaStream_t stream) {
    const int32_t hd16 = (heads.head_dim + 15) / 16 * 16;
    if (hd16 <= 64)
        launch_prefill_bf16<64>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
    else if (hd16 <= 128)
        launch_prefill_bf16<128>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
    else
        launch_prefill_bf16<256>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
}

}  // namespace minfer::cuda
