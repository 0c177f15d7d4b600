// The tests' one way to build a GGUF array value from raw element bytes
// (shared by the GGUF unit tests and the fuzz seed writer).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/gguf/gguf.h"

namespace minfer::test {

inline GGUFValue array_value(GGUFValueType elem, std::vector<uint8_t> raw, uint64_t count) {
    GGUFArray a;
    a.elem_type = elem;
    a.raw = std::move(raw);
    a.count = count;
    return {GGUFValueType::ARRAY, std::move(a)};
}

}  // namespace minfer::test
