// What the BlockManager tests share: token lists put together, and a hash that collides always.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace minfer::block_manager_test {

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Every block lands in one hash bucket: only the stored parent and tokens can tell blocks apart.
inline uint64_t constant_hash(std::span<const int32_t>, uint64_t) { return 42; }

}  // namespace minfer::block_manager_test
