// Paged attention for prefill chunks and mixed steps on tensor cores
// (FlashAttention-2 style); attention.cu's dispatch takes it for steps with
// attention tiles when the head dim and pointers allow 16-byte copies.
//
// One kernel skeleton, prefill_tiles: one block per (tile of <= kAttnTileRows
// rows of one sequence, kv head, chunk); the tile's (row, q head of the group)
// pairs are packed 64 to a chunk, a warp owning 16 of them; K/V tiles of 32
// keys are double-buffered in shared memory (cp.async); S = Q K^T and O += P V
// stay in registers with causal/window masks per row and an online softmax.
// Two policies fill in how a tile is staged and multiplied:
//   Tf32Tiles (prefill_kernel, float32 or bf16 pool): mma.sync m16n8k8 tf32,
//     3xTF32 split so the products are near fp32, Q staged as floats;
//   Bf16Tiles (prefill_bf16_kernel, bf16 pool): bf16 m16n8k16 with ldmatrix,
//     Q and P rounded to bf16.
#include "kernels/cuda/attention_common.cuh"

namespace minfer::cuda {

namespace {

constexpr int kPreThreads = 128;
constexpr int kPreWarps = kPreThreads / 32;
constexpr int kPreVecs = 16 * kPreWarps;  // (row, head) pairs per block: 16 per warp (one m16 fragment)
constexpr int kPreKeys = 32;              // keys per K/V tile
constexpr int kPreNFrag = kPreKeys / 8;

struct PrefillArgs {
    HeadShape heads;
    float scale;
    int32_t window;
    float* out;
};

// The block's (row, head) vectors: vector v is query row row0 + (vec0 + v) / group
// of the tile, head (vec0 + v) % group of kv head kvh's group; nvec of them.
struct PrefillVectors {
    int32_t vec0, nvec, row0, group, n_heads, kvh;
    __device__ __forceinline__ const float* q_row(const float* q, int32_t v, int32_t hd) const {
        const int32_t pv = vec0 + v, r = row0 + pv / group, g = pv % group;
        return q + (int64_t(r) * n_heads + kvh * group + g) * hd;
    }
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

// ---- the two ways to multiply a tile ----------------------------------------------------
//
// prefill_tiles (below) is the kernel: it walks the K/V tiles and runs the
// softmax; a Tiles policy says how a tile is staged and multiplied. Each gives
//   Pool                     the pool's element type
//   Tiles(smem, head_dim)    the shared-memory layout
//   load_kv(...)             keys t0.. of K and V into stage 0 or 1 (cp.async)
//   stage_q(...)             the block's (row, head) vectors of Q
//   start_warp()             what a warp keeps of Q across tiles
//   scores(s, stage)         S = Q K^T for the warp's 16 vectors and 32 keys
//   accumulate(o, s, stage)  O += P V, P being the softmaxed S

// 3xTF32 (m16n8k8) over a float or bf16 pool. Shared-memory rows of Q are
// hd8 + 4 floats (hd8 = head_dim rounded up to 8): a stride of 4 mod 8 words
// makes the scalar fragment loads conflict-free. K and V rows are hd8 + one
// 16-byte copy of pool elements.
template <int HDP, class T>
struct Tf32Tiles {
    using Pool = T;
    static constexpr int E = kPerCopy<T>, kOFrag = HDP / 8;
    int32_t hd, hd8, ld, ldt;
    float* q_s;  // [kPreVecs][ld]
    T* k_s;      // [2][kPreKeys][ldt]
    T* v_s;      // [2][kPreKeys][ldt]
    const float* qw;

    // Tile rows hold head_dim rounded up to 8 columns.
    static __host__ __device__ int32_t padded(int32_t head_dim) { return (head_dim + 7) / 8 * 8; }
    static size_t smem_bytes(HeadShape heads) {
        const size_t hd8 = size_t(padded(heads.head_dim));
        return sizeof(float) * (hd8 + 4) * kPreVecs + sizeof(T) * (hd8 + E) * 2 * 2 * kPreKeys;
    }
    __device__ __forceinline__ Tf32Tiles(float4* smem, int32_t head_dim)
        : hd(head_dim), hd8(padded(head_dim)), ld(hd8 + 4), ldt(hd8 + E) {
        q_s = reinterpret_cast<float*>(smem);
        k_s = reinterpret_cast<T*>(q_s + kPreVecs * ld);
        v_s = k_s + 2 * kPreKeys * ldt;
        qw = q_s + (threadIdx.x / 32) * 16 * ld;
    }
    __device__ __forceinline__ void load_kv(const KvTileSource& src, const T* __restrict__ k_pool,
                                            const T* __restrict__ v_pool, int stage, int32_t t0) {
        load_kv_tile<kPreKeys, kPreThreads>(src, k_pool, v_pool, t0, k_s + stage * kPreKeys * ldt,
                                            v_s + stage * kPreKeys * ldt, ldt);
    }
    // Vector v = (row (vec0+v)/group, head (vec0+v)%group); zeros past nvec and past head_dim.
    __device__ __forceinline__ void stage_q(const float* __restrict__ q, const PrefillVectors& pv) {
        const int32_t c8 = hd8 / 4, c4 = hd / 4;
        for (int32_t i = threadIdx.x; i < kPreVecs * c8; i += kPreThreads) {
            const int32_t v = i / c8, c = i - v * c8;
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (v < pv.nvec && c < c4) x = *reinterpret_cast<const float4*>(pv.q_row(q, v, hd) + c * 4);
            *reinterpret_cast<float4*>(q_s + v * ld + c * 4) = x;
        }
    }
    __device__ __forceinline__ void start_warp() {}
    __device__ __forceinline__ void scores(float (&s)[kPreNFrag][4], int stage) const {
        const int32_t lane = threadIdx.x % 32, g8 = lane / 4, t4 = lane % 4;
        const T* ks = k_s + stage * kPreKeys * ldt;
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
    }
    // The accumulator layout of S (columns 2t, 2t+1) becomes the A layout
    // (columns t, t+4) by reading keys in the order 0,2,4,6,1,3,5,7 within each
    // 8: A's column t is key 2t, column t+4 is key 2t+1, and V's B rows follow
    // the same order. Each tile's P V goes into a fresh accumulator added to O
    // with an fp32 add: the tensor cores' own accumulation truncates, which over
    // thousands of keys would add up to a bias (~1e-5).
    __device__ __forceinline__ void accumulate(float (&o)[kOFrag][4], const float (&s)[kPreNFrag][4],
                                               int stage) const {
        const int32_t lane = threadIdx.x % 32, g8 = lane / 4, t4 = lane % 4;
        const T* vs = v_s + stage * kPreKeys * ldt;
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
};

// bf16 m16n8k16 over a bf16 pool: K and V are used as the pool holds them, Q
// is rounded to bf16 as it is staged, and P is rounded to bf16 before P V (as
// FlashAttention-2 does); the products accumulate in fp32. One m16n8k16 does
// the work of six m16n8k8 tf32 of Tf32Tiles. The accumulator of S (row g8,
// keys 2t4 and 2t4 + 1 of each 8) is already the A fragment of P V (rows g8 /
// g8 + 8, keys 2t4, 2t4 + 1 and + 8, + 9 of each 16), so P never leaves the
// registers. Rows of Q, K and V in shared memory are hd16 + 8 bf16 (hd16 =
// head_dim rounded up to 16; the padding keeps rows 16-byte aligned for cp.async).
template <int HDP>
struct Bf16Tiles {
    using Pool = bf16;
    static constexpr int kOFrag = HDP / 8;
    // The warp's Q fragments stay in registers for every tile up to head_dim 128
    // (32 registers); at 256 they are reloaded per tile.
    static constexpr bool kQInRegs = HDP <= 128;
    int32_t hd, hd16, ld;
    bf16* q_s;  // [kPreVecs][ld]
    bf16* k_s;  // [2][kPreKeys][ld]
    bf16* v_s;  // [2][kPreKeys][ld]
    const bf16* qw;
    uint32_t qf[kQInRegs ? HDP / 16 : 1][4];

    // Tile rows hold head_dim rounded up to 16 columns.
    static __host__ __device__ int32_t padded(int32_t head_dim) { return (head_dim + 15) / 16 * 16; }
    static size_t smem_bytes(HeadShape heads) {
        const size_t ld = size_t(padded(heads.head_dim) + 8);
        return sizeof(bf16) * ld * (kPreVecs + 2 * 2 * kPreKeys);
    }
    __device__ __forceinline__ Bf16Tiles(float4* smem, int32_t head_dim)
        : hd(head_dim), hd16(padded(head_dim)), ld(hd16 + 8) {
        q_s = reinterpret_cast<bf16*>(smem);
        k_s = q_s + kPreVecs * ld;
        v_s = k_s + 2 * kPreKeys * ld;
        // ldmatrix row addresses (lane j: row j % 8 of matrix j / 8), as in decode_bf16_kernel:
        // Q's are (row, head) pairs x dims.
        const int32_t lane = threadIdx.x % 32, q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_dim = (lane >> 4) * 8;
        qw = q_s + ((threadIdx.x / 32) * 16 + q_row) * ld + q_dim;
    }
    __device__ __forceinline__ void load_kv(const KvTileSource& src, const bf16* __restrict__ k_pool,
                                            const bf16* __restrict__ v_pool, int stage, int32_t t0) {
        load_kv_tile<kPreKeys, kPreThreads>(src, k_pool, v_pool, t0, k_s + stage * kPreKeys * ld,
                                            v_s + stage * kPreKeys * ld, ld);
    }
    // Q rounded to bf16, vectors as in Tf32Tiles::stage_q.
    __device__ __forceinline__ void stage_q(const float* __restrict__ q, const PrefillVectors& pv) {
        const int32_t pairs16 = hd16 / 2;
        for (int32_t i = threadIdx.x; i < kPreVecs * pairs16; i += kPreThreads) {
            const int32_t v = i / pairs16, c = 2 * (i - v * pairs16);
            float x0 = 0.0f, x1 = 0.0f;
            if (v < pv.nvec && c < hd) {  // head_dim is a multiple of 8: both or neither
                const float2 x = *reinterpret_cast<const float2*>(pv.q_row(q, v, hd) + c);
                x0 = x.x, x1 = x.y;
            }
            *reinterpret_cast<uint32_t*>(q_s + v * ld + c) = pack_bf16(x0, x1);
        }
    }
    __device__ __forceinline__ void start_warp() {
        if constexpr (kQInRegs) {
            __syncthreads();
#pragma unroll
            for (int kb = 0; kb < HDP / 16; ++kb)
                if (kb * 16 < hd16) ldmatrix_x4(qf[kb], qw + kb * 16);
        }
    }
    // 16 dims per mma; one ldmatrix.x4 gives the B of two n-fragments (16 keys).
    __device__ __forceinline__ void scores(float (&s)[kPreNFrag][4], int stage) const {
        const int32_t lane = threadIdx.x % 32;
        const int32_t k_key = (lane & 7) + (lane >> 4) * 8, k_dim = ((lane >> 3) & 1) * 8;  // keys x dims
        const bf16* ks = k_s + stage * kPreKeys * ld;
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
    }
    // 16 keys per mma: P's A fragment is S's accumulator, two n-frags of keys;
    // one ldmatrix.x4.trans gives V's B for 16 keys and two n-fragments (16 dims).
    __device__ __forceinline__ void accumulate(float (&o)[kOFrag][4], const float (&s)[kPreNFrag][4],
                                               int stage) const {
        const int32_t lane = threadIdx.x % 32;
        const int32_t v_key = (lane & 7) + ((lane >> 3) & 1) * 8, v_dim = (lane >> 4) * 8;  // keys x dims, transposed
        const bf16* vs = v_s + stage * kPreKeys * ld;
        uint32_t pa[kPreKeys / 16][4];
#pragma unroll
        for (int kc = 0; kc < kPreKeys / 16; ++kc) {
            pa[kc][0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
            pa[kc][1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
            pa[kc][2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
            pa[kc][3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
        }
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
};

// ---- the kernel ---------------------------------------------------------------------------

// One block: a tile of one sequence's rows, one kv head, one chunk of
// kPreVecs (row, head) vectors. HDP: head_dim rounded up to the policy's
// multiple is at most HDP (64, 128 or 256): the register arrays' size.
template <int HDP, class Tiles>
__device__ __forceinline__ void prefill_tiles(const DeviceStep& st, const float* __restrict__ q,
                                              const typename Tiles::Pool* __restrict__ k_pool,
                                              const typename Tiles::Pool* __restrict__ v_pool,
                                              const PrefillArgs& a) {
    pdl_wait();
    constexpr int kOFrag = HDP / 8;
    extern __shared__ float4 prefill_smem4[];
    __shared__ int32_t range_s[2];
    const int32_t tile = blockIdx.x, kvh = blockIdx.y, chunk = blockIdx.z;
    const int32_t hd = a.heads.head_dim, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads;
    const int32_t seq = st.attn_tiles[3 * tile], row0 = st.attn_tiles[3 * tile + 1], count = st.attn_tiles[3 * tile + 2];
    const int32_t vec0 = chunk * kPreVecs;
    if (vec0 >= count * group) return;
    const int32_t nvec = min(kPreVecs, count * group - vec0);
    const int32_t t4 = threadIdx.x % 4;
    Tiles tiles(prefill_smem4, hd);

    const PrefillRows rows = prefill_rows(st, a.window, row0, vec0, nvec, group, range_s);
    const int32_t lo = rows.lo, hi = rows.hi;
    const KvTileSource src{st.block_tables + int64_t(seq) * st.max_blocks_per_seq, st.block_size,
                           int64_t(a.heads.n_kv_heads) * hd, kvh, hd, Tiles::padded(hd), hi};

    const int32_t ntiles = (hi - lo + kPreKeys) / kPreKeys;
    tiles.load_kv(src, k_pool, v_pool, 0, lo);
    cp_async_commit();
    tiles.stage_q(q, PrefillVectors{vec0, nvec, row0, group, n_heads, kvh});

    float o[kOFrag][4];
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    tiles.start_warp();

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kPreKeys;
        if (it + 1 < ntiles) tiles.load_kv(src, k_pool, v_pool, (it + 1) & 1, t0 + kPreKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (t0 <= rows.w_hi && t0 + kPreKeys - 1 >= rows.w_lo) {  // warp-uniform
            float s[kPreNFrag][4];  // 16 vectors x 32 keys a warp
#pragma unroll
            for (int f = 0; f < kPreNFrag; ++f) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.0f;
            tiles.scores(s, it & 1);
            online_softmax(s, o, m, l, rows, t0, t4, a.scale);
            tiles.accumulate(o, s, it & 1);
        }
        __syncthreads();
    }

    store_prefill_output(o, l, a, row0, vec0, nvec, group, kvh);
}

// The kernels: 3xTF32 over a float32 pool, bf16 m16n8k16 over a bf16 one.
template <int HDP>
__global__ void __launch_bounds__(kPreThreads) prefill_kernel(DeviceStep st, const float* __restrict__ q,
                                                              const float* __restrict__ k_pool,
                                                              const float* __restrict__ v_pool, PrefillArgs a) {
    prefill_tiles<HDP, Tf32Tiles<HDP, float>>(st, q, k_pool, v_pool, a);
}

template <int HDP>
__global__ void __launch_bounds__(kPreThreads) prefill_bf16_kernel(DeviceStep st, const float* __restrict__ q,
                                                                   const bf16* __restrict__ k_pool,
                                                                   const bf16* __restrict__ v_pool, PrefillArgs a) {
    prefill_tiles<HDP, Bf16Tiles<HDP>>(st, q, k_pool, v_pool, a);
}

// Each pool type's policy and kernel.
template <int HDP, class T>
struct PrefillFor;
template <int HDP>
struct PrefillFor<HDP, float> {
    using Tiles = Tf32Tiles<HDP, float>;
    static constexpr auto kernel = prefill_kernel<HDP>;
};
template <int HDP>
struct PrefillFor<HDP, bf16> {
    using Tiles = Bf16Tiles<HDP>;
    static constexpr auto kernel = prefill_bf16_kernel<HDP>;
};

template <int HDP, class T>
void launch_prefill(const DeviceStep& st, const float* q, const T* k_pool, const T* v_pool, HeadShape heads,
                    float scale, int32_t window, float* out, cudaStream_t stream) {
    using For = PrefillFor<HDP, T>;
    static size_t allowed = 0;
    const size_t smem = For::Tiles::smem_bytes(heads);
    allow_smem(For::kernel, smem, allowed);
    const int32_t group = heads.n_heads / heads.n_kv_heads;
    const dim3 grid(st.num_attn_tiles, heads.n_kv_heads, (kAttnTileRows * group + kPreVecs - 1) / kPreVecs);
    launch_pdl(For::kernel, grid, kPreThreads, smem, stream, st, q, k_pool, v_pool,
               PrefillArgs{heads, scale, window, out});
}

// The instance whose register arrays fit head_dim rounded up (HDP 64, 128 or 256).
template <class T>
void dispatch_prefill(const DeviceStep& st, const float* q, const T* k_pool, const T* v_pool, HeadShape heads,
                      float scale, int32_t window, float* out, cudaStream_t stream) {
    const int32_t padded = PrefillFor<64, T>::Tiles::padded(heads.head_dim);
    if (padded <= 64)
        launch_prefill<64>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
    else if (padded <= 128)
        launch_prefill<128>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
    else
        launch_prefill<256>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
}

}  // namespace

void launch_prefill_attention(const DeviceStep& st, const float* q, const float* k_pool, const float* v_pool,
                              HeadShape heads, float scale, int32_t window, float* out, cudaStream_t stream) {
    dispatch_prefill(st, q, k_pool, v_pool, heads, scale, window, out, stream);
}
void launch_prefill_attention(const DeviceStep& st, const float* q, const bf16* k_pool, const bf16* v_pool,
                              HeadShape heads, float scale, int32_t window, float* out, cudaStream_t stream) {
    dispatch_prefill(st, q, k_pool, v_pool, heads, scale, window, out, stream);
}

}  // namespace minfer::cuda
