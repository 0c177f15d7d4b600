// DeviceSampler: one upload of the step's sampling rows, the kernels of
// sampling_device.cu, one download of the ids.
//
// The upload (one cudaMemcpyAsync from pinned memory) holds, as 4-byte words:
//   SampleRowParams  x rows          temperature, top-k/p, min-p, repetition penalty,
//                                    seed/stream/position halves, entry range, mask range
//   SampleTokenEntry x entries       each row's distinct edited ids: bias range, flags, penalty
//   float            x biases        logit_bias values, grouped by entry, in the request's order
//   uint32_t         x mask words    allowed masks of the rows that have one
//   int32_t          x sampled rows  the non-greedy rows
//   int32_t          x (chunk + 1)   sort segment offsets i * vocab
//   float            x vocab each    the q of each sampled row whose draft has one (draft_q_row's
//                                    order): copied from the row's span straight into the pinned
//                                    buffer, since at vocab * 4 bytes a row they outweigh the rest
#include "kernels/cuda/device_sampler.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/staging.h"

namespace minfer::cuda {

namespace {

static_assert(std::is_trivially_copyable_v<SampleRowParams> && sizeof(SampleRowParams) % 4 == 0);
static_assert(std::is_trivially_copyable_v<SampleTokenEntry> && sizeof(SampleTokenEntry) % 4 == 0);
static_assert(uint32_t(SampleDraw::Sample) == uint32_t(Draw::Sample) &&
              uint32_t(SampleDraw::Accept) == uint32_t(Draw::Accept) &&
              uint32_t(SampleDraw::Recover) == uint32_t(Draw::Recover));

constexpr int64_t kSortElems = int64_t(1) << 22;  // elements sorted at once (4 arrays: 64 MiB)
constexpr int32_t kMaxChunk = 1024;                // rows sorted at once

template <class T>
size_t bytes_of(const std::vector<T>& v) {
    return v.size() * sizeof(T);
}

}  // namespace

DeviceSampler::~DeviceSampler() {
    if (stream_) cudaStreamSynchronize(stream_);
    cudaFree(dev_);
    cudaFreeHost(host_);
}

size_t DeviceSampler::pack(int32_t vocab, std::span<const SamplingRow> rows, int32_t chunk) {
    params_.clear();
    entries_.clear();
    biases_.clear();
    masks_.clear();
    sampled_.clear();
    offsets_.clear();
    draft_q_.clear();
    if (slot_.size() < size_t(vocab)) slot_.assign(size_t(vocab), -1);
    std::vector<int32_t>& counts = counts_;

    for (size_t r = 0; r < rows.size(); ++r) {
        const SamplingRow& row = rows[r];
        const SamplingParams& p = *row.params;
        SampleRowParams q;
        q.temperature = p.temperature;
        q.top_k = p.top_k;
        q.top_p = p.top_p;
        q.min_p = p.min_p;
        q.repetition_penalty = p.repetition_penalty;
        q.seed_lo = uint32_t(p.seed);
        q.seed_hi = uint32_t(p.seed >> 32);
        q.stream_lo = uint32_t(row.stream);
        q.stream_hi = uint32_t(row.stream >> 32);
        const auto pos = uint64_t(row.position);
        q.pos_lo = uint32_t(pos);
        q.pos_hi = uint32_t(pos >> 32);

        // Token entries: each distinct id once (slot_ maps an id to its entry while the row is built).
        const int32_t begin = int32_t(entries_.size());
        q.entry_begin = begin;
        touched_.clear();
        counts.clear();
        auto entry = [&](int32_t id) -> int32_t {
            if (slot_[id] < 0) {
                slot_[id] = int32_t(entries_.size());
                SampleTokenEntry e;
                e.id = id;
                entries_.push_back(e);
                touched_.push_back(id);
            }
            return slot_[id];
        };
        auto in_vocab = [&](int32_t id) { return id >= 0 && id < vocab; };
        row_biases_.clear();
        for (const auto& [id, bias] : p.logit_bias)
            if (in_vocab(id)) row_biases_.push_back({entry(id), bias});
        for (int32_t id : row.suppressed_ids)
            if (in_vocab(id)) entries_[entry(id)].flags |= kEntrySuppressed;
        if (p.repetition_penalty != 1.0f)
            for (auto list : {row.prompt_tokens, row.output_tokens})
                for (int32_t t : list)
                    if (in_vocab(t)) entries_[entry(t)].flags |= kEntrySeen;
        if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
            for (int32_t t : row.output_tokens)
                if (in_vocab(t)) {
                    const int32_t e = entry(t);
                    counts.resize(entries_.size() - begin, 0);
                    ++counts[e - begin];
                }
            for (size_t i = 0; i < counts.size(); ++i)
                if (const int n = counts[i]) {
                    SampleTokenEntry& e = entries_[begin + i];
                    e.flags |= kEntryPenalised;
                    // The reference's expression, so the host computes the same float.
                    e.penalty = p.presence_penalty + p.frequency_penalty * n;
                }
        }
        // Biases grouped by entry, each entry's in the order of logit_bias.
        std::stable_sort(row_biases_.begin(), row_biases_.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (size_t i = 0; i < row_biases_.size();) {
            SampleTokenEntry& e = entries_[row_biases_[i].first];
            e.bias_begin = int32_t(biases_.size());
            const int32_t which = row_biases_[i].first;
            while (i < row_biases_.size() && row_biases_[i].first == which) biases_.push_back(row_biases_[i++].second);
            e.bias_end = int32_t(biases_.size());
        }
        for (int32_t id : touched_) slot_[id] = -1;
        q.entry_end = int32_t(entries_.size());

        if (!row.allowed_mask.empty()) {
            const size_t words = std::min(row.allowed_mask.size(), (size_t(vocab) + 31) / 32);
            q.mask_begin = int32_t(masks_.size());
            q.mask_words = int32_t(words);
            masks_.insert(masks_.end(), row.allowed_mask.begin(), row.allowed_mask.begin() + words);
        }
        // A greedy row returns the argmax, draft or not, so only sampled rows verify
        // and only their q is sent.
        q.draft_token = row.draft_token >= 0 ? row.draft_token : -1;
        if (q.draft_token >= 0 && !p.greedy() && !row.draft_probs.empty()) {
            if (row.draft_probs.size() < size_t(vocab))
                throw std::invalid_argument("cuda: a draft's probabilities must cover the vocabulary");
            q.draft_q_row = int32_t(draft_q_.size());
            draft_q_.push_back(row.draft_probs.data());
        }
        if (!p.greedy()) sampled_.push_back(int32_t(r));
        params_.push_back(q);
    }
    for (int32_t i = 0; i <= chunk; ++i) offsets_.push_back(i * vocab);

    const size_t sizes[] = {bytes_of(params_), bytes_of(entries_), bytes_of(biases_),
                            bytes_of(masks_),  bytes_of(sampled_), bytes_of(offsets_)};
    const void* srcs[] = {params_.data(), entries_.data(), biases_.data(),
                          masks_.data(),  sampled_.data(), offsets_.data()};
    const size_t q_bytes = size_t(vocab) * sizeof(float);
    size_t total = 0;
    for (size_t s : sizes) total += s;
    const size_t q_offset = total;
    total += draft_q_.size() * q_bytes;
    grow_staging(dev_, host_, capacity_, total, stream_);
    size_t offset[std::size(sizes)];
    size_t at = 0;
    for (size_t i = 0; i < std::size(sizes); ++i) {
        offset[i] = at;
        if (sizes[i]) std::memcpy(host_ + at, srcs[i], sizes[i]);
        at += sizes[i];
    }
    for (const float* q : draft_q_) {
        std::memcpy(host_ + at, q, q_bytes);
        at += q_bytes;
    }
    CUDA_CHECK(cudaMemcpyAsync(dev_, host_, total, cudaMemcpyHostToDevice, stream_));

    dev_sampling_.rows = reinterpret_cast<const SampleRowParams*>(dev_ + offset[0]);
    dev_sampling_.entries = reinterpret_cast<const SampleTokenEntry*>(dev_ + offset[1]);
    dev_sampling_.biases = reinterpret_cast<const float*>(dev_ + offset[2]);
    dev_sampling_.masks = reinterpret_cast<const uint32_t*>(dev_ + offset[3]);
    dev_sampling_.sampled_rows = reinterpret_cast<const int32_t*>(dev_ + offset[4]);
    dev_sampling_.seg_offsets = reinterpret_cast<const int32_t*>(dev_ + offset[5]);
    dev_sampling_.draft_probs = reinterpret_cast<const float*>(dev_ + q_offset);
    dev_sampling_.num_rows = int32_t(rows.size());
    dev_sampling_.num_sampled = int32_t(sampled_.size());
    return total;
}

void DeviceSampler::grow_scratch(int32_t chunk, int32_t vocab) {
    const size_t elems = size_t(chunk) * size_t(vocab);
    if (elems > scratch_elems_) {
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        for (int i = 0; i < 2; ++i) {  // all four freed before any is allocated
            keys_[i].release();
            vals_[i].release();
            scratch_.keys[i] = nullptr;
            scratch_.vals[i] = nullptr;
        }
        scratch_elems_ = 0;
        for (int i = 0; i < 2; ++i) {
            keys_[i].ensure(elems * sizeof(float), stream_);
            vals_[i].ensure(elems * sizeof(int32_t), stream_);
            scratch_.keys[i] = keys_[i].as<float>();
            scratch_.vals[i] = vals_[i].as<int32_t>();
        }
        scratch_elems_ = elems;
    }
    const int32_t sampled = int32_t(sampled_.size()), rest = sampled % chunk;
    size_t temp = sample_sort_temp_bytes(std::min(chunk, sampled), vocab);
    if (rest) temp = std::max(temp, sample_sort_temp_bytes(rest, vocab));
    if (temp_.ensure(temp, stream_)) {
        scratch_.temp = temp_.get();
        scratch_.temp_bytes = temp_.bytes();
    }
}

size_t DeviceSampler::sample(float* logits, int32_t vocab, std::span<const SamplingRow> rows, int32_t* out_ids) {
    const int32_t n = int32_t(rows.size());
    if (n == 0) return 0;
    if (vocab <= 0) throw std::invalid_argument("cuda: sample needs a vocabulary of at least one token");
    // The ids, then the argmax's partials (16-byte aligned).
    const size_t ids_bytes = (size_t(n) * sizeof(int32_t) + 15) / 16 * 16;
    const size_t bytes = ids_bytes + argmax_workspace_bytes(n, vocab);
    ids_dev_.ensure(bytes, stream_);
    int32_t* ids_dev = ids_dev_.as<int32_t>();
    int32_t sampled = 0;
    for (const SamplingRow& row : rows) sampled += !row.params->greedy();
    const int32_t chunk =
        sampled ? int32_t(std::clamp<int64_t>(kSortElems / vocab, 1, std::min<int64_t>(sampled, kMaxChunk))) : 0;

    const size_t uploaded = pack(vocab, rows, chunk);
    launch_sample_processors(dev_sampling_, logits, n, vocab, stream_);
    // The greedy rows' ids (the sampled rows' are overwritten below).
    launch_argmax_rows(logits, n, vocab, ids_dev_.as<char>() + ids_bytes, ids_dev, stream_);
    if (sampled) {
        grow_scratch(chunk, vocab);
        for (int32_t first = 0; first < sampled; first += chunk)
            launch_sample_sorted(dev_sampling_, logits, vocab, first, std::min(chunk, sampled - first), scratch_,
                                 ids_dev, stream_);
    }
    CUDA_CHECK(cudaMemcpyAsync(out_ids, ids_dev, size_t(n) * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return uploaded;
}

}  // namespace minfer::cuda
