// Chapter 2.1's foundational exercises: vector add, a sum reduction, row
// softmax and matrix transpose, each written naively first and then improved
// one idea at a time. Every version runs on fresh random data, is compared with
// its CPU twin by relative error (PASS/FAIL against a threshold), and is timed
// (median of N launches after warm-up). All four are memory-bound, so the
// yardstick is bytes moved per second against the H200's measured 4.19 TB/s
// device-to-device copy.
//
//   minfer_ladder_exercises [--runs N]        (default 20 timed launches a version)
//
// Byte counts are the ideal traffic (each input read once, each output written
// once); a version that reads more than that shows up as a lower GB/s.
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/ladder/common.cuh"

using namespace ladder;

// ============================================================================
// 1. Vector add: c = a + b. No reuse at all: 12 bytes move per FLOP, so the
//    only question is how close to the copy bandwidth the loads and stores get.
// ============================================================================

// One thread an element. Consecutive threads touch consecutive floats, so a
// warp's 32 loads coalesce into four 32-byte sectors: already near the limit.
__global__ void vector_add_naive(const float* a, const float* b, float* c, int64_t n) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// 16-byte loads (float4) and a grid-stride loop over a grid sized to the
// machine: fewer instructions per byte and fewer blocks to schedule. The tail
// that is not a multiple of four is done by the first threads.
__global__ void vector_add_float4(const float* a, const float* b, float* c, int64_t n) {
    const int64_t n4 = n / 4;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    for (int64_t i = t; i < n4; i += stride) {
        const float4 x = a4[i], y = b4[i];
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    const int64_t tail = 4 * n4 + t;
    if (tail < n) c[tail] = a[tail] + b[tail];
}

static bool run_vector_add(int runs) {
    const int64_t n = (int64_t(1) << 26) + 3;  // not a multiple of the block: the edge is tested too
    std::vector<float> ha(n), hb(n);
    fill_uniform(ha, -1.f, 1.f, 1);
    fill_uniform(hb, -1.f, 1.f, 2);
    std::vector<float> ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = ha[i] + hb[i];
    DeviceArray<float> a(n), b(n), c(n);
    a.upload(ha);
    b.upload(hb);
    const double bytes = 3.0 * n * sizeof(float);
    bool ok = true;
    std::printf("\n-- vector add, n = %lld floats\n", (long long)n);

    CUDA_CHECK(cudaMemset(c.p, 0, n * sizeof(float)));
    auto v1 = [&] { vector_add_naive<<<unsigned((n + 255) / 256), 256>>>(a.p, b.p, c.p, n); };
    v1();
    ok &= report_bw("add v1 naive", rel_error(c.download().data(), ref.data(), n), 1e-6, median_ms(v1, runs), bytes);

    CUDA_CHECK(cudaMemset(c.p, 0, n * sizeof(float)));
    const int grid = sm_count() * 8;
    auto v2 = [&] { vector_add_float4<<<grid, 256>>>(a.p, b.p, c.p, n); };
    v2();
    ok &= report_bw("add v2 float4 grid-stride", rel_error(c.download().data(), ref.data(), n), 1e-6,
                    median_ms(v2, runs), bytes);
    return ok;
}

// ============================================================================
// 2. Sum reduction: one float out of n. The arithmetic is trivial; what costs
//    is how the partial sums meet. Error is |got - ref| / sum|x|, the bound a
//    floating-point sum can promise (the sum of random signs can be near zero,
//    so dividing by |ref| would measure luck, not the kernel).
// ============================================================================

// Every thread adds its element straight into the result: n atomics on one
// address, serialized in the L2. Correct, and the slowest way to sum.
__global__ void reduce_atomic(const float* x, int64_t n, float* out) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}

// A block sums its 256 elements in shared memory as a tree: half the threads
// add the upper half onto the lower half, log2(256) = 8 rounds, one atomic per
// block. Sequential addressing (tid < s adds tid + s) keeps the active threads
// contiguous, so whole warps retire and no two lanes hit one bank.
__global__ void reduce_smem_tree(const float* x, int64_t n, float* out) {
    __shared__ float s[256];
    const int tid = threadIdx.x;
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + tid;
    s[tid] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, s[0]);
}

// Inside a warp the lanes can read each other's registers (shfl): five
// exchanges sum 32 values with no shared memory and no barrier.
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// The block's sum from warp sums: each warp reduces with shuffles, lane 0
// parks its sum in shared memory, and the first warp reduces those. Two
// barriers instead of eight. (The engine's block_sum in reduce.cuh has the same two levels.)
__device__ __forceinline__ float block_reduce_sum(float v) {
    __shared__ float warp_sums[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_reduce_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    v = threadIdx.x < warps ? warp_sums[threadIdx.x] : 0.f;
    if (warp == 0) v = warp_reduce_sum(v);
    return v;  // valid in thread 0
}

__global__ void reduce_warp_shuffle(const float* x, int64_t n, float* out) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const float v = block_reduce_sum(i < n ? x[i] : 0.f);
    if (threadIdx.x == 0) atomicAdd(out, v);
}

// One pass with many elements a thread: a grid sized to the machine, each
// thread summing its float4s in a register through a grid-stride loop before
// any communication. Loads dominate now (16 bytes a load, several in flight),
// and there are only grid-many atomics.
__global__ void reduce_many_per_thread(const float* x, int64_t n, float* out) {
    const int64_t n4 = n / 4;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float acc = 0.f;
    for (int64_t i = t; i < n4; i += stride) {
        const float4 v = x4[i];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    const int64_t tail = 4 * n4 + t;
    if (tail < n) acc += x[tail];
    acc = block_reduce_sum(acc);
    if (threadIdx.x == 0) atomicAdd(out, acc);
}

static bool run_reduce(int runs) {
    const int64_t n = (int64_t(1) << 26) + 5;
    std::vector<float> hx(n);
    fill_uniform(hx, -1.f, 1.f, 3);
    double ref = 0, abs_sum = 0;
    for (float v : hx) ref += v, abs_sum += std::fabs(double(v));
    DeviceArray<float> x(n), out(1);
    x.upload(hx);
    const double bytes = double(n) * sizeof(float);
    bool ok = true;
    std::printf("\n-- sum reduction, n = %lld floats (time includes a 4-byte memset of the result)\n", (long long)n);
    auto check = [&](const char* name, auto kernel_launch) {
        auto launch = [&] {
            CUDA_CHECK(cudaMemsetAsync(out.p, 0, sizeof(float)));
            kernel_launch();
        };
        launch();
        const double got = out.download()[0];
        ok &= report_bw(name, std::fabs(got - ref) / abs_sum, 1e-6, median_ms(launch, runs), bytes);
    };
    const unsigned blocks = unsigned((n + 255) / 256);
    check("reduce v1 atomic per element", [&] { reduce_atomic<<<blocks, 256>>>(x.p, n, out.p); });
    check("reduce v2 shared-memory tree", [&] { reduce_smem_tree<<<blocks, 256>>>(x.p, n, out.p); });
    check("reduce v3 warp shuffles", [&] { reduce_warp_shuffle<<<blocks, 256>>>(x.p, n, out.p); });
    const int grid = sm_count() * 4;
    check("reduce v4 many per thread, float4", [&] { reduce_many_per_thread<<<grid, 512>>>(x.p, n, out.p); });
    return ok;
}

// ============================================================================
// 3. Row softmax: y = exp(x - max) / sum(exp(x - max)) for each row. The max
//    keeps exp from overflowing; computing it costs a pass over the row.
// ============================================================================

// One thread a row, three passes: the max, the sum of exponentials, the write.
// Reads the row three times, and neighbouring threads read rows C floats apart,
// so no load coalesces.
__global__ void softmax_three_pass(const float* x, float* y, int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + int64_t(r) * cols;
    float* yr = y + int64_t(r) * cols;
    float m = -FLT_MAX;
    for (int j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
    float s = 0.f;
    for (int j = 0; j < cols; ++j) s += expf(xr[j] - m);
    const float inv = 1.f / s;
    for (int j = 0; j < cols; ++j) yr[j] = expf(xr[j] - m) * inv;
}

// Online softmax (Milakov and Gimelshein, 2018): one pass keeps a running max m
// and a sum s of exp(x - m); when the max grows, the sum so far is rescaled by
// exp(m_old - m_new). Max and sum come from one read; the write is the second.
// Still a thread per row: the access pattern, not the passes, is now the limit.
__global__ void softmax_online(const float* x, float* y, int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + int64_t(r) * cols;
    float* yr = y + int64_t(r) * cols;
    float m = -FLT_MAX, s = 0.f;
    for (int j = 0; j < cols; ++j) {
        const float v = xr[j];
        const float mn = fmaxf(m, v);
        s = s * expf(m - mn) + expf(v - mn);
        m = mn;
    }
    const float inv = 1.f / s;
    for (int j = 0; j < cols; ++j) yr[j] = expf(xr[j] - m) * inv;
}

// Merge two online-softmax states (m, s): the one with the smaller max is
// rescaled onto the larger. This is what lets lanes work on pieces of a row.
__device__ __forceinline__ void merge_state(float& m, float& s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

// A warp a row: lane l takes columns l, l + 32, ..., so each load of the warp
// is 128 contiguous bytes (coalesced); the 32 lane states are merged with five
// shuffles. The second pass rereads the row, mostly from L2.
__global__ void softmax_warp_per_row(const float* x, float* y, int rows, int cols) {
    const int warps_per_block = blockDim.x / 32;
    const int r = blockIdx.x * warps_per_block + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;  // whole warps leave together: the shuffles below stay full
    const float* xr = x + int64_t(r) * cols;
    float* yr = y + int64_t(r) * cols;
    float m = -FLT_MAX, s = 0.f;  // -FLT_MAX, not -inf: exp(m - mn) of two empty states stays 1, not NaN
    for (int j = lane; j < cols; j += 32) {
        const float v = xr[j];
        const float mn = fmaxf(m, v);
        s = s * expf(m - mn) + expf(v - mn);
        m = mn;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        merge_state(m, s, m2, s2);
    }
    const float inv = 1.f / s;
    for (int j = lane; j < cols; j += 32) yr[j] = expf(xr[j] - m) * inv;
}

static bool run_softmax(int runs) {
    const int rows = 8192, cols = 4096;  // a batch of rows as wide as a small vocabulary chunk
    const size_t n = size_t(rows) * cols;
    std::vector<float> hx(n);
    fill_uniform(hx, -8.f, 8.f, 4);
    std::vector<double> ref(n);
    for (int r = 0; r < rows; ++r) {
        const float* xr = &hx[size_t(r) * cols];
        double m = -1e300, s = 0;
        for (int j = 0; j < cols; ++j) m = std::max(m, double(xr[j]));
        for (int j = 0; j < cols; ++j) s += std::exp(double(xr[j]) - m);
        for (int j = 0; j < cols; ++j) ref[size_t(r) * cols + j] = std::exp(double(xr[j]) - m) / s;
    }
    DeviceArray<float> x(n), y(n);
    x.upload(hx);
    const double bytes = 2.0 * n * sizeof(float);
    bool ok = true;
    std::printf("\n-- row softmax, %d x %d floats\n", rows, cols);
    auto check = [&](const char* name, auto launch) {
        CUDA_CHECK(cudaMemset(y.p, 0, n * sizeof(float)));
        launch();
        ok &= report_bw(name, rel_error(y.download().data(), ref.data(), n), 1e-5, median_ms(launch, runs), bytes);
    };
    check("softmax v1 three-pass, thread/row", [&] { softmax_three_pass<<<(rows + 127) / 128, 128>>>(x.p, y.p, rows, cols); });
    check("softmax v2 online, thread/row", [&] { softmax_online<<<(rows + 127) / 128, 128>>>(x.p, y.p, rows, cols); });
    check("softmax v3 online, warp/row", [&] { softmax_warp_per_row<<<(rows + 7) / 8, 256>>>(x.p, y.p, rows, cols); });
    return ok;
}

// ============================================================================
// 4. Transpose: out[c][r] = in[r][c]. Reading rows coalesces; writing columns
//    does not, unless the tile is turned around in shared memory.
// ============================================================================
constexpr int kTile = 32, kTileRows = 8;  // a 32x32 tile, a block of 32x8 threads, 4 elements a thread

// Reads coalesce (threadIdx.x walks a row); writes stride by `rows` floats, so
// each warp store touches 32 different sectors.
__global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
    const int c = blockIdx.x * kTile + threadIdx.x;
    for (int k = 0; k < kTile; k += kTileRows) {
        const int r = blockIdx.y * kTile + threadIdx.y + k;
        if (r < rows && c < cols) out[int64_t(c) * rows + r] = in[int64_t(r) * cols + c];
    }
}

// Stage a 32x32 tile in shared memory: read it by rows (coalesced), then write
// it out by rows of the transposed matrix (coalesced), reading shared memory by
// columns. A column of a [32][32] float tile lies in one bank: a 32-way bank
// conflict on every shared read.
__global__ void transpose_smem_tile(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[kTile][kTile];
    const int bx = blockIdx.x * kTile, by = blockIdx.y * kTile;
    for (int k = 0; k < kTile; k += kTileRows) {
        const int r = by + threadIdx.y + k, c = bx + threadIdx.x;
        if (r < rows && c < cols) tile[threadIdx.y + k][threadIdx.x] = in[int64_t(r) * cols + c];
    }
    __syncthreads();
    for (int k = 0; k < kTile; k += kTileRows) {
        const int r = bx + threadIdx.y + k, c = by + threadIdx.x;  // row r of out = column r of in
        if (r < cols && c < rows) out[int64_t(r) * rows + c] = tile[threadIdx.x][threadIdx.y + k];
    }
}

// The same with one padding column: row i of the tile starts at bank i mod 32,
// so a column's 32 elements fall in 32 different banks. One float a row of
// shared memory buys the conflict-free read.
__global__ void transpose_smem_padded(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[kTile][kTile + 1];
    const int bx = blockIdx.x * kTile, by = blockIdx.y * kTile;
    for (int k = 0; k < kTile; k += kTileRows) {
        const int r = by + threadIdx.y + k, c = bx + threadIdx.x;
        if (r < rows && c < cols) tile[threadIdx.y + k][threadIdx.x] = in[int64_t(r) * cols + c];
    }
    __syncthreads();
    for (int k = 0; k < kTile; k += kTileRows) {
        const int r = bx + threadIdx.y + k, c = by + threadIdx.x;
        if (r < cols && c < rows) out[int64_t(r) * rows + c] = tile[threadIdx.x][threadIdx.y + k];
    }
}

static bool run_transpose(int runs) {
    const int rows = 8192, cols = 8200;  // cols not a multiple of 32: the edge tiles are tested
    const size_t n = size_t(rows) * cols;
    std::vector<float> hx(n);
    fill_uniform(hx, -1.f, 1.f, 5);
    std::vector<float> ref(n);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) ref[size_t(c) * rows + r] = hx[size_t(r) * cols + c];
    DeviceArray<float> x(n), y(n);
    x.upload(hx);
    const double bytes = 2.0 * n * sizeof(float);
    const dim3 block(kTile, kTileRows), grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
    bool ok = true;
    std::printf("\n-- transpose, %d x %d floats\n", rows, cols);
    auto check = [&](const char* name, auto launch) {
        CUDA_CHECK(cudaMemset(y.p, 0, n * sizeof(float)));
        launch();
        ok &= report_bw(name, rel_error(y.download().data(), ref.data(), n), 0.0, median_ms(launch, runs), bytes);
    };
    check("transpose v1 naive", [&] { transpose_naive<<<grid, block>>>(x.p, y.p, rows, cols); });
    check("transpose v2 shared tile", [&] { transpose_smem_tile<<<grid, block>>>(x.p, y.p, rows, cols); });
    check("transpose v3 shared tile, padded", [&] { transpose_smem_padded<<<grid, block>>>(x.p, y.p, rows, cols); });
    // The ceiling the three are chasing: the same bytes moved by the copy engine's kernel.
    auto copy = [&] { CUDA_CHECK(cudaMemcpyAsync(y.p, x.p, n * sizeof(float), cudaMemcpyDeviceToDevice)); };
    std::printf("%-34s %19s %9.3f ms\n", "cudaMemcpy d2d (same bytes)", "", median_ms(copy, runs));
    return ok;
}

int main(int argc, char** argv) {
    const int runs = ladder::runs_flag(argc, argv, 20);
    if (runs < 0) return 2;
    try {
        print_device();
        std::printf("median of %d launches after 3 warm-up; GB/s counts each input read and each output written once\n",
                    runs);
        bool ok = true;
        ok &= run_vector_add(runs);
        ok &= run_reduce(runs);
        ok &= run_softmax(runs);
        ok &= run_transpose(runs);
        std::printf("\n%s\n", ok ? "all versions PASS" : "some version FAILED");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
