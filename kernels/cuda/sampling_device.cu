// Sampling on the device, bit for bit the reference sampler of
// kernels/sampling.cpp (sample_row) except for the order of its double sums:
//
//   1. sample_processors_kernel (one block per row): the allowed mask, then the
//      row's token entries (one distinct id per thread, so no two threads
//      write one logit): biases one by one, suppression, repetition penalty,
//      presence/frequency penalty.
//   2. greedy rows: launch_argmax_rows (sampling.cu) over the processed logits.
//   3. the other rows, a chunk at a time: copy into scratch, sort each row by
//      (logit desc, id asc) with CUB's segmented radix sort (stable, and it
//      orders -0.0 and +0.0 as equal, like the reference's comparison), then
//      sample_sorted_kernel (one block per row): top-k, probabilities
//      exp((l - max) / T) in float, top-p, min-p and the inverse CDF on
//      philox_uniform(seed, stream, position), the same Philox4x32-10; or,
//      for a row with a draft, the reference's verify_draft (the end of
//      sample_sorted_kernel): accept the draft, or draw its replacement.
//
// Every float operation that the reference does in float is written with an
// explicit rounding intrinsic, so that nvcc cannot contract it into an FMA.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace minfer::cuda {

namespace {

constexpr int kProcThreads = 256;
constexpr int kGatherThreads = 256;
constexpr int kSampleThreads = 1024;

// philox4x32 and philox_uniform of kernels/sampling.cpp, on the stream
// draw_stream(stream, purpose): the purpose in the top byte of the stream's
// high half (Sample, 0, leaves the stream as it is).
__device__ __forceinline__ float philox_uniform(const SampleRowParams& p, SampleDraw purpose) {
    uint32_t c0 = p.pos_lo, c1 = p.pos_hi, c2 = p.stream_lo, c3 = p.stream_hi ^ (uint32_t(purpose) << 24);
    uint32_t k0 = p.seed_lo, k1 = p.seed_hi;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return __fmul_rn(__uint2float_rn(c0 >> 8), 0x1.0p-24f);  // exact, as on the host
}

__device__ __forceinline__ bool mask_allows(const uint32_t* mask, int32_t words, int32_t t) {
    return (t >> 5) < words && ((mask[t >> 5] >> (t & 31)) & 1u);
}

__global__ void sample_processors_kernel(DeviceSampling s, float* logits, int32_t vocab) {
    const SampleRowParams p = s.rows[blockIdx.x];
    const bool has_mask = p.mask_words >= 0;
    if (!has_mask && p.entry_begin == p.entry_end) return;
    float* x = logits + int64_t(blockIdx.x) * vocab;
    const uint32_t* mask = s.masks + p.mask_begin;
    if (has_mask)
        for (int32_t t = threadIdx.x; t < vocab; t += blockDim.x)
            if (!mask_allows(mask, p.mask_words, t)) x[t] = -INFINITY;
    // Disallowed ids end at -inf whatever their entry says (the reference's
    // penalties keep -inf at -inf), and the sweep above writes only those, so
    // the entries below touch other logits than the sweep: no barrier needed.
    for (int32_t e = p.entry_begin + int32_t(threadIdx.x); e < p.entry_end; e += blockDim.x) {
        const SampleTokenEntry en = s.entries[e];
        if (en.id < 0 || en.id >= vocab) continue;
        if (has_mask && !mask_allows(mask, p.mask_words, en.id)) continue;
        float l = x[en.id];
        for (int32_t b = en.bias_begin; b < en.bias_end; ++b) l = __fadd_rn(l, s.biases[b]);
        if (en.flags & kEntrySuppressed) l = -INFINITY;
        if (en.flags & kEntrySeen)
            l = l > 0 ? __fdiv_rn(l, p.repetition_penalty) : __fmul_rn(l, p.repetition_penalty);
        if (en.flags & kEntryPenalised) l = __fsub_rn(l, en.penalty);
        x[en.id] = l;
    }
}

// keys/vals row j = logits row sampled_rows[first + j] and the ids 0..vocab-1.
__global__ void gather_sort_input_kernel(DeviceSampling s, const float* logits, int32_t vocab, int32_t first,
                                         float* keys, int32_t* vals) {
    const int32_t row = s.sampled_rows[first + blockIdx.y];
    const int32_t t = int32_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= vocab) return;
    const int64_t dst = int64_t(blockIdx.y) * vocab + t;
    keys[dst] = logits[int64_t(row) * vocab + t];
    vals[dst] = t;
}

// One block per row of the chunk; keys/ids are the sorted row, probs a scratch row.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) sample_sorted_kernel(DeviceSampling s, int32_t vocab, int32_t first,
                                                                 const float* keys, const int32_t* ids_sorted,
                                                                 float* probs_buf, int32_t* out_ids) {
    using Scan = cub::BlockScan<double, kThreads>;
    using Reduce = cub::BlockReduce<double, kThreads>;
    __shared__ union {
        typename Scan::TempStorage scan;
        typename Reduce::TempStorage reduce;
    } tmp;
    __shared__ double sh_sum;
    __shared__ int32_t sh_first;

    const int32_t tid = threadIdx.x;
    const int32_t row = s.sampled_rows[first + blockIdx.x];
    const SampleRowParams p = s.rows[row];
    const int64_t base = int64_t(blockIdx.x) * vocab;
    const float* k = keys + base;
    const int32_t* ids = ids_sorted + base;
    float* probs = probs_buf + base;

    // sum of value(i) for i in [0, n) in double (all threads get it).
    auto block_sum = [&](int32_t n, auto value) {
        double part = 0;
        for (int32_t i = tid; i < n; i += kThreads) part += value(i);
        const double sum = Reduce(tmp.reduce).Sum(part);
        if (tid == 0) sh_sum = sum;
        __syncthreads();
        const double r = sh_sum;
        __syncthreads();  // tmp and sh_sum may be reused
        return r;
    };
    // The first i in [0, n) whose running sum of value(i) (inclusive) satisfies
    // hit(value(i), cum), or -1.
    auto first_cum = [&](int32_t n, auto value, auto hit) {
        if (tid == 0) sh_first = INT_MAX;
        __syncthreads();
        double carry = 0;
        for (int32_t start = 0; start < n; start += kThreads) {
            const int32_t i = start + tid;
            const double v = i < n ? value(i) : 0.0;
            double inclusive, aggregate;
            Scan(tmp.scan).InclusiveSum(v, inclusive, aggregate);
            if (i < n && hit(v, carry + inclusive)) atomicMin(&sh_first, i);
            __syncthreads();  // also separates the uses of tmp.scan
            if (sh_first != INT_MAX) break;
            carry += aggregate;
        }
        const int32_t r = sh_first == INT_MAX ? -1 : sh_first;
        __syncthreads();
        return r;
    };

    int32_t keep = p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab;
    const float max_logit = k[0];
    for (int32_t i = tid; i < keep; i += kThreads)
        probs[i] = expf(__fdiv_rn(__fsub_rn(k[i], max_logit), p.temperature));
    __syncthreads();
    auto prob = [&](int32_t j) { return double(probs[j]); };
    const double total = block_sum(keep, prob);

    if (p.top_p < 1.0f) {
        const double top_p = p.top_p;
        const int32_t i = first_cum(
            keep, [&](int32_t j) { return double(probs[j]) / total; }, [&](double, double cum) { return cum >= top_p; });
        if (i >= 0) keep = i + 1;
    }
    if (p.min_p > 0.0f) {
        const float floor = __fmul_rn(p.min_p, probs[0]);
        if (tid == 0) sh_first = INT_MAX;
        __syncthreads();
        for (int32_t i = 1 + tid; i < keep; i += kThreads)
            if (!(probs[i] >= floor)) atomicMin(&sh_first, i);
        __syncthreads();
        if (sh_first != INT_MAX) keep = sh_first;
        __syncthreads();
    }
    const int32_t full = p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab;
    const double kept_total = keep == full ? total : block_sum(keep, prob);

    if (p.draft_token < 0) {
        const double target = double(philox_uniform(p, SampleDraw::Sample)) * kept_total;
        const int32_t i = first_cum(keep, prob, [&](double, double cum) { return target < cum; });
        if (tid == 0) out_ids[row] = ids[i >= 0 ? i : keep - 1];
        return;
    }

    // verify_draft of kernels/sampling.cpp (Leviathan et al.): with p(x) =
    // probs[i] / kept_total for x = ids[i], i < keep (0 for the tokens cut),
    // accept the draft d with probability min(1, p(d) / q(d)), else draw from
    // norm(max(0, p - q)); the token is then distributed exactly as p. Each
    // double below is the reference's expression, rounded the same way.
    const int32_t d = p.draft_token;
    const float* q_row = p.draft_q_row >= 0 ? s.draft_probs + int64_t(p.draft_q_row) * vocab : nullptr;
    // q(token): the draft's distribution, or one-hot at d (n-gram lookup).
    auto q = [&](int32_t token) {
        if (!q_row) return token == d ? 1.0 : 0.0;
        return token < vocab ? double(q_row[token]) : 0.0;  // a draft outside the vocabulary has no q
    };
    // Where d is among the kept candidates (ids are distinct: at most one thread writes).
    if (tid == 0) sh_first = -1;
    __syncthreads();
    for (int32_t i = tid; i < keep; i += kThreads)
        if (ids[i] == d) sh_first = i;
    __syncthreads();
    const int32_t at = sh_first;
    __syncthreads();  // sh_first is reused by first_cum
    const double p_d = at >= 0 ? __ddiv_rn(double(probs[at]), kept_total) : 0.0;
    const double u = philox_uniform(p, SampleDraw::Accept);
    if (__dmul_rn(u, q(d)) < p_d) {  // u < p(d) / q(d), without dividing by a q(d) of 0
        if (tid == 0) out_ids[row] = d;
        return;
    }

    // Rejected: residual(i) = max(0, p(x_i) - q(x_i)), as std::max(0.0, r)
    // computes it: (0 < r ? r : 0), so that a NaN counts as 0 here too.
    auto residual = [&](int32_t i) {
        const double r = __dsub_rn(__ddiv_rn(double(probs[i]), kept_total), q(ids[i]));
        return 0.0 < r ? r : 0.0;
    };
    const double residual_total = block_sum(keep, residual);
    const double v = philox_uniform(p, SampleDraw::Recover);
    // The reference's draw_weighted: the first index with a weight > 0 whose
    // running sum passes the target (zero weights are skipped, so the hit also
    // asks for a weight > 0: a block scan's running sums, summed in another
    // order, could otherwise pass the target at a zero weight); if rounding
    // leaves the target past the end, the last index with a weight > 0 (0 when
    // none has one). p <= q on every kept token (total not > 0) happens only
    // through rounding; the reference then draws from p itself.
    auto draw_weighted = [&](double target, auto weight) {
        int32_t i = first_cum(keep, weight, [&](double w, double cum) { return w > 0 && target < cum; });
        if (i < 0) {
            if (tid == 0) sh_first = 0;
            __syncthreads();
            for (int32_t j = tid; j < keep; j += kThreads)
                if (weight(j) > 0) atomicMax(&sh_first, j);
            __syncthreads();
            i = sh_first;
        }
        return i;
    };
    const int32_t i = residual_total > 0 ? draw_weighted(__dmul_rn(v, residual_total), residual)
                                         : draw_weighted(__dmul_rn(v, kept_total), prob);
    if (tid == 0) out_ids[row] = ids[i];
}

}  // namespace

void launch_sample_processors(const DeviceSampling& s, float* logits, int32_t rows, int32_t vocab,
                              cudaStream_t stream) {
    if (rows == 0) return;
    sample_processors_kernel<<<rows, kProcThreads, 0, stream>>>(s, logits, vocab);
    CUDA_CHECK_LAUNCH();
}

size_t sample_sort_temp_bytes(int32_t chunk, int32_t vocab) {
    cub::DoubleBuffer<float> keys(nullptr, nullptr);
    cub::DoubleBuffer<int32_t> vals(nullptr, nullptr);
    size_t bytes = 0;
    const int32_t* offsets = nullptr;
    CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(nullptr, bytes, keys, vals, chunk * vocab, chunk,
                                                                  offsets, offsets + 1));
    return bytes;
}

void launch_sample_sorted(const DeviceSampling& s, const float* logits, int32_t vocab, int32_t first,
                          int32_t count, const SampleScratch& scratch, int32_t* out_ids, cudaStream_t stream) {
    if (count == 0) return;
    const dim3 grid((vocab + kGatherThreads - 1) / kGatherThreads, count);
    gather_sort_input_kernel<<<grid, kGatherThreads, 0, stream>>>(s, logits, vocab, first, scratch.keys[0],
                                                                    scratch.vals[0]);
    CUDA_CHECK_LAUNCH();

    cub::DoubleBuffer<float> keys(scratch.keys[0], scratch.keys[1]);
    cub::DoubleBuffer<int32_t> vals(scratch.vals[0], scratch.vals[1]);
    size_t bytes = scratch.temp_bytes;
    CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(scratch.temp, bytes, keys, vals, count * vocab,
                                                                  count, s.seg_offsets, s.seg_offsets + 1, 0,
                                                                  int(sizeof(float) * 8), stream));
    CUDA_CHECK_LAUNCH();

    sample_sorted_kernel<kSampleThreads><<<count, kSampleThreads, 0, stream>>>(
        s, vocab, first, keys.Current(), vals.Current(), keys.Alternate(), out_ids);
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
