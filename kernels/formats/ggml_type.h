// ggml's tensor types: the ids GGUF files store and the block geometry of each.
//
// Shared by the GGUF reader (engine/gguf), the quant formats (quant.h) and both
// backends, so it lives at the bottom, with the other numeric formats.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace minfer {

// A malformed file or a shape its type cannot have (the GGUF reader's error;
// ggml_row_bytes throws it too, so that a bad tensor shape reads as a bad file).
struct GGUFError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ggml tensor type ids, as stored in the file.
enum class GGMLType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};

struct GGMLTypeTraits {
    const char* name;      // "F32", "Q8_0", ...
    int64_t block_elems;   // weights per block (1 for plain types)
    int64_t block_bytes;   // bytes per block
};
// nullptr for an id we do not know.
const GGMLTypeTraits* ggml_type_traits(uint32_t type_id);
const char* ggml_type_name(GGMLType t);  // "?" when unknown
// Bytes of a row of `n` elements; throws GGUFError if n is not a multiple of the block.
uint64_t ggml_row_bytes(GGMLType t, int64_t n);

}  // namespace minfer
