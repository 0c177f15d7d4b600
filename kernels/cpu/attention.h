// Paged attention on the CPU, tiled as FlashAttention does on a GPU: a tile
// is up to kLanes (query row, head) pairs of one sequence that share a kv head
// (consecutive rows of a prefill chunk, and the heads of a GQA group); each key
// and value row is read once for the whole tile.
//
// The pairs are the SIMD lanes: lane l's score for key t is its own serial dot
// product over the head's dimensions, its softmax sum and its output are its
// own serial sums over the keys. So a pair's result is the same bits whichever
// tile holds it, in any batch (batch invariance, as the matmuls), and the
// compiler's vector code and scalar code agree.
#pragma once

#include <cstdint>
#include <vector>

namespace minfer::cpu {

constexpr int kAttentionLanes = 32;  // two AVX-512 registers of floats

// Where a sequence's keys lie: its block table over the pool.
struct PagedSequence {
    const int32_t* block_table;
    int32_t block_size;
    int64_t kv_row;  // pool elements per token (n_kv_heads * head_dim)
};

// One tile: pair l (l < lanes) is query row row[l], head head[l], attending to
// keys first[l]..last[l] (causal, and the sliding window if any).
struct AttentionTile {
    int32_t kv_head = 0;
    int32_t lanes = 0;
    int32_t row[kAttentionLanes], head[kAttentionLanes];
    int32_t first[kAttentionLanes], last[kAttentionLanes];
};

// For each lane: out[(row * n_heads + head) * hd ..] = softmax(scale * q . K) V,
// q = q_all[(row * n_heads + head) * hd ..]. T: float, or uint16_t (bf16 bits).
// scratch grows as needed.
template <class T>
void attend_tile(const AttentionTile& tile, const float* q_all, int32_t n_heads, int32_t hd, float scale,
                 const T* k_pool, const T* v_pool, const PagedSequence& seq, std::vector<float>& scratch, float* out);

}  // namespace minfer::cpu
