// libFuzzer target for the GGUF reader (see README.md in this folder).
//
// For any input, GGUFFile::parse must either accept it or throw a GGUFError.
// Any other exception escapes and aborts, and AddressSanitizer / UBSan catch
// reads past the input, overflows and the like; libFuzzer reports all of them
// as crashes. An accepted file must also keep its promises: its tensors lie
// inside the input, and rewriting it with GGUFWriter gives a file that parses
// back to the same metadata and tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>

#include "engine/gguf/gguf.h"

using namespace minfer;

namespace {

// abort() rather than assert(): the check must stay in any build.
void require(bool ok) {
    if (!ok) std::abort();
}

bool same_value(const GGUFValue& a, const GGUFValue& b) {
    if (a.type != b.type || a.v.index() != b.v.index()) return false;
    if (const auto* x = std::get_if<double>(&a.v)) {
        // Compare bits: NaN != NaN, but the writer must keep it as it was.
        const double y = std::get<double>(b.v);
        return std::memcmp(x, &y, sizeof y) == 0;
    }
    if (const auto* x = std::get_if<GGUFArray>(&a.v)) {
        const GGUFArray& y = std::get<GGUFArray>(b.v);
        return x->elem_type == y.elem_type && x->count == y.count && x->raw == y.raw && x->strings == y.strings;
    }
    if (const auto* x = std::get_if<uint64_t>(&a.v)) return *x == std::get<uint64_t>(b.v);
    if (const auto* x = std::get_if<int64_t>(&a.v)) return *x == std::get<int64_t>(b.v);
    if (const auto* x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
    return std::get<std::string>(a.v) == std::get<std::string>(b.v);
}

void round_trip(const GGUFFile& f) {
    // llama.cpp reads tensor names of at most 63 bytes, so the writer refuses
    // longer ones; the reader accepts them.
    for (const GGUFTensorInfo& t : f.tensors())
        if (t.name.size() > 63) return;

    GGUFWriter w(f.alignment());
    for (const auto& [key, value] : f.metadata()) w.set_value(key, value);
    for (const GGUFTensorInfo& t : f.tensors())
        w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    const std::vector<uint8_t> bytes = w.to_bytes();
    const GGUFFile g = GGUFFile::parse(bytes, "rewritten");  // a GGUFError here escapes: a writer bug

    require(g.alignment() == f.alignment());
    // The writer adds general.alignment when the file lacked it.
    const size_t extra = (f.alignment() != 32 && !f.has("general.alignment")) ? 1 : 0;
    require(g.metadata().size() == f.metadata().size() + extra);
    for (size_t i = 0; i < f.metadata().size(); ++i) {
        require(g.metadata()[i].first == f.metadata()[i].first);
        require(same_value(g.metadata()[i].second, f.metadata()[i].second));
    }
    require(g.tensors().size() == f.tensors().size());
    for (size_t i = 0; i < f.tensors().size(); ++i) {
        const GGUFTensorInfo& a = f.tensors()[i];
        const GGUFTensorInfo& b = g.tensors()[i];
        require(a.name == b.name && a.type == b.type && a.ne == b.ne && a.nbytes == b.nbytes);
        require(std::memcmp(a.data, b.data, a.nbytes) == 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::optional<GGUFFile> file;
    try {
        file.emplace(GGUFFile::parse(std::span<const uint8_t>(data, size), "fuzz"));
    } catch (const GGUFError&) {
        return 0;  // rejected cleanly
    }
    const GGUFFile& f = *file;

    // Touch both ends of every tensor: ASan reports a pointer outside the input.
    volatile uint8_t sink = 0;
    for (const GGUFTensorInfo& t : f.tensors()) {
        require(t.data >= data && t.nbytes <= size && t.data + t.nbytes <= data + size);
        require(t.nbytes == ggml_row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(t.rows()));
        sink = sink + t.data[0] + t.data[t.nbytes - 1];
        require(f.find_tensor(t.name) == &t);
    }
    // Every accessor on every key: a GGUFError is fine, anything else is not.
    for (const auto& [key, value] : f.metadata()) {
        require(f.find(key) == &value);
        try { (void)f.get_uint(key); } catch (const GGUFError&) {}
        try { (void)f.get_int(key); } catch (const GGUFError&) {}
        try { (void)f.get_float(key); } catch (const GGUFError&) {}
        try { (void)f.get_bool(key); } catch (const GGUFError&) {}
        try { (void)f.get_string(key); } catch (const GGUFError&) {}
        try { (void)f.get_string_array(key); } catch (const GGUFError&) {}
        try { (void)f.get_f32_array(key); } catch (const GGUFError&) {}
        try { (void)f.get_int_array(key); } catch (const GGUFError&) {}
    }
    round_trip(f);
    return 0;
}
