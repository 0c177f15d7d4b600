#include "kernels/formats/ggml_type.h"

#include <fmt/format.h>

namespace minfer {

namespace {

struct TypeRow {
    uint32_t id;
    GGMLTypeTraits traits;
};

// Block geometry of the ggml types we know, checked against the PyPI package
// gguf 0.19.0 (gguf.constants.GGML_QUANT_SIZES). Ids that ggml has retired
// (4, 5) or that we cannot compute with (the IQ types) are left out on
// purpose: a file using them is rejected when it is opened.
constexpr TypeRow kTypes[] = {
    {0, {"F32", 1, 4}},       {1, {"F16", 1, 2}},       {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},    {6, {"Q5_0", 32, 22}},    {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},    {9, {"Q8_1", 32, 40}},    {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}}, {12, {"Q4_K", 256, 144}}, {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}}, {15, {"Q8_K", 256, 292}}, {24, {"I8", 1, 1}},
    {25, {"I16", 1, 2}},      {26, {"I32", 1, 4}},      {27, {"I64", 1, 8}},
    {28, {"F64", 1, 8}},      {30, {"BF16", 1, 2}},
};

}  // namespace

const GGMLTypeTraits* ggml_type_traits(uint32_t type_id) {
    for (const auto& row : kTypes)
        if (row.id == type_id) return &row.traits;
    return nullptr;
}

const char* ggml_type_name(GGMLType t) {
    const GGMLTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
    return tr ? tr->name : "?";
}

uint64_t ggml_row_bytes(GGMLType t, int64_t n) {
    const GGMLTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
    if (!tr) throw GGUFError(fmt::format("unknown ggml type id {}", static_cast<uint32_t>(t)));
    if (n < 0 || n % tr->block_elems != 0)
        throw GGUFError(fmt::format("a row of {} elements is not a whole number of {} blocks ({} elements each)",
                                    n, tr->name, tr->block_elems));
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(n / tr->block_elems), static_cast<uint64_t>(tr->block_bytes),
                               &bytes))
        throw GGUFError(fmt::format("a row of {} {} elements overflows 64 bits", n, tr->name));
    return bytes;
}

}  // namespace minfer
