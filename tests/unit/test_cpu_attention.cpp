// The CPU's tiled paged attention (kernels/cpu/attention.cpp): against a
// float64 softmax attention on random data, and the same bits for a (row, head)
// pair whichever tile holds it.
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/formats/float16.h"
#include "../rel_error.h"

using namespace minfer;

namespace {

// A pool of `blocks` blocks of `bs` tokens, kv_heads x hd each, and a shuffled
// block table, so that keys are not where their positions say.
struct Pool {
    int32_t bs = 16, kv_heads = 2, hd = 80, tokens = 300;
    std::vector<float> k, v;
    std::vector<int32_t> table;
    explicit Pool(std::mt19937& rng, int32_t head_dim = 80) : hd(head_dim) {
        const int32_t blocks = (tokens + bs - 1) / bs + 3;
        std::normal_distribution<float> normal;
        k.resize(size_t(blocks) * bs * kv_heads * hd);
        v.resize(k.size());
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        for (int32_t b = 0; b < blocks; ++b) table.push_back(b);
        std::shuffle(table.begin(), table.end(), rng);
    }
    const float* row(const std::vector<float>& pool, int32_t t, int32_t kvh) const {
        return pool.data() + (int64_t(table[t / bs]) * bs + t % bs) * kv_heads * hd + int64_t(kvh) * hd;
    }
};

std::vector<double> reference(const Pool& p, const float* q, int32_t kvh, int32_t first, int32_t last, double scale) {
    std::vector<double> s;
    double m = -INFINITY;
    for (int32_t t = first; t <= last; ++t) {
        double d = 0;
        for (int32_t j = 0; j < p.hd; ++j) d += double(q[j]) * p.row(p.k, t, kvh)[j];
        s.push_back(d * scale);
        m = std::max(m, s.back());
    }
    double total = 0;
    for (double& x : s) total += (x = std::exp(x - m));
    std::vector<double> out(p.hd, 0.0);
    for (int32_t t = first; t <= last; ++t)
        for (int32_t j = 0; j < p.hd; ++j) out[j] += s[t - first] / total * p.row(p.v, t, kvh)[j];
    return out;
}

}  // namespace

namespace {

void check_tiles(int32_t head_dim) {
    CAPTURE(head_dim);
    std::mt19937 rng(42);
    Pool pool(rng, head_dim);
    const int32_t n_heads = 6, group = n_heads / pool.kv_heads, rows = 12;
    const float scale = 1.0f / std::sqrt(float(pool.hd));
    std::vector<float> q(size_t(rows) * n_heads * pool.hd);
    std::normal_distribution<float> normal;
    for (float& x : q) x = normal(rng);
    const int32_t pos0 = pool.tokens - rows;  // rows are the last 12 positions; a window of 100 on odd rows
    auto first_of = [&](int32_t r) { return r % 2 ? pos0 + r - 99 : 0; };
    const cpu::PagedSequence seq{pool.table.data(), pool.bs, int64_t(pool.kv_heads) * pool.hd};
    std::vector<float> scratch;

    // Every (row, head) of kv head 1 in tiles of 16, as the backend packs them.
    const int32_t kvh = 1;
    std::vector<float> tiled(q.size(), NAN);
    cpu::AttentionTile tile;
    tile.kv_head = kvh;
    auto flush = [&] {
        cpu::attend_tile(tile, q.data(), n_heads, pool.hd, scale, pool.k.data(), pool.v.data(), seq, scratch,
                         tiled.data());
        tile.lanes = 0;
    };
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t g = 0; g < group; ++g) {
            const int l = tile.lanes++;
            tile.row[l] = r, tile.head[l] = kvh * group + g, tile.first[l] = first_of(r), tile.last[l] = pos0 + r;
            if (tile.lanes == cpu::kAttentionLanes) flush();
        }
    if (tile.lanes) flush();

    for (int32_t r = 0; r < rows; ++r)
        for (int32_t g = 0; g < group; ++g) {
            const int32_t h = kvh * group + g;
            const float* out = tiled.data() + (int64_t(r) * n_heads + h) * pool.hd;
            const std::vector<double> ref =
                reference(pool, q.data() + (int64_t(r) * n_heads + h) * pool.hd, kvh, first_of(r), pos0 + r, scale);
            CHECK(test::rel_error(std::vector<float>(out, out + pool.hd), ref) < 1e-5);

            // The same pair alone in its tile (a decode row): the same bits.
            cpu::AttentionTile alone;
            alone.kv_head = kvh, alone.lanes = 1;
            alone.row[0] = r, alone.head[0] = h, alone.first[0] = first_of(r), alone.last[0] = pos0 + r;
            std::vector<float> single(q.size(), NAN);
            cpu::attend_tile(alone, q.data(), n_heads, pool.hd, scale, pool.k.data(), pool.v.data(), seq, scratch,
                             single.data());
            CHECK(std::memcmp(single.data() + (int64_t(r) * n_heads + h) * pool.hd, out, pool.hd * sizeof(float)) == 0);
        }
}

}  // namespace

TEST_CASE("cpu attention: tiles match a float64 softmax, and a pair's bits do not depend on its tile") {
    check_tiles(80);  // a decode row's values in whole registers
    check_tiles(66);  // and two dimensions after them
}

TEST_CASE("cpu attention: a bf16 pool widens exactly") {
    std::mt19937 rng(7);
    Pool pool(rng);
    // Round the pool to bf16; the float pool then holds the same values.
    std::vector<uint16_t> k16(pool.k.size()), v16(pool.v.size());
    for (size_t i = 0; i < k16.size(); ++i) {
        k16[i] = f32_to_bf16(pool.k[i]), pool.k[i] = bf16_to_f32(k16[i]);
        v16[i] = f32_to_bf16(pool.v[i]), pool.v[i] = bf16_to_f32(v16[i]);
    }
    const int32_t n_heads = 2, hd = pool.hd;
    std::vector<float> q(size_t(n_heads) * hd);
    std::normal_distribution<float> normal;
    for (float& x : q) x = normal(rng);
    cpu::AttentionTile tile;
    tile.kv_head = 0, tile.lanes = 1, tile.row[0] = 0, tile.head[0] = 0, tile.first[0] = 0, tile.last[0] = 200;
    const cpu::PagedSequence seq{pool.table.data(), pool.bs, int64_t(pool.kv_heads) * hd};
    std::vector<float> scratch, a(q.size(), NAN), b(q.size(), NAN);
    cpu::attend_tile(tile, q.data(), n_heads, hd, 0.1f, pool.k.data(), pool.v.data(), seq, scratch, a.data());
    cpu::attend_tile(tile, q.data(), n_heads, hd, 0.1f, k16.data(), v16.data(), seq, scratch, b.data());
    CHECK(std::memcmp(a.data(), b.data(), hd * sizeof(float)) == 0);
}
