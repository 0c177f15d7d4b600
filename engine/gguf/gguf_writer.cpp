// The GGUF writer: builds a v3 file in memory, in the layout llama.cpp writes.
//
//   header, KVs (insertion order), tensor infos (insertion order),
//   zero padding to the alignment, then each tensor's bytes followed by zero
//   padding to the alignment (after the last tensor too, as llama.cpp does).
//   A file without tensors stops after the metadata.
//
// Everything is validated when it is added (set_* / add_tensor), so to_bytes()
// only serializes, and a file this writer produces always passes the reader.
//
// Files too large to hold are streamed: add_tensor_info declares a tensor
// without its data, header_bytes() gives everything before the data section,
// and the caller writes the tensors itself (engine/gguf/synth.cpp does).
#include "engine/gguf/gguf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace minfer {

namespace {

// llama.cpp rejects tensor names of GGML_MAX_NAME (64) bytes or more.
constexpr size_t kMaxTensorName = 63;
constexpr uint32_t kDefaultAlignment = 32;


// Appends little-endian values to the file image.
struct Sink {
    std::vector<uint8_t> out;

    template <typename T>
    void put(T v) {
        bytes(&v, sizeof(T));
    }
    void bytes(const void* p, size_t n) {
        // resize + memcpy rather than insert(): GCC 12 warns falsely about the latter.
        const size_t at = out.size();
        out.resize(at + n);
        if (n > 0) std::memcpy(out.data() + at, p, n);
    }
    void string(const std::string& s) {
        put<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
    void pad_to(uint64_t alignment) {
        while (out.size() % alignment != 0) out.push_back(0);
    }
};

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

// Which variant alternative holds each scalar type (see GGUFValue).
bool holds_right_alternative(const GGUFValue& v) {
    switch (v.type) {
        case GGUFValueType::U8:
        case GGUFValueType::U16:
        case GGUFValueType::U32:
        case GGUFValueType::U64: return std::holds_alternative<uint64_t>(v.v);
        case GGUFValueType::I8:
        case GGUFValueType::I16:
        case GGUFValueType::I32:
        case GGUFValueType::I64: return std::holds_alternative<int64_t>(v.v);
        case GGUFValueType::F32:
        case GGUFValueType::F64: return std::holds_alternative<double>(v.v);
        case GGUFValueType::BOOL: return std::holds_alternative<bool>(v.v);
        case GGUFValueType::STRING: return std::holds_alternative<std::string>(v.v);
        case GGUFValueType::ARRAY: return std::holds_alternative<GGUFArray>(v.v);
    }
    return false;
}

// The range of a widened integer value must fit its on-disk type.
bool fits(const GGUFValue& v) {
    switch (v.type) {
        case GGUFValueType::U8: return std::get<uint64_t>(v.v) <= 0xff;
        case GGUFValueType::U16: return std::get<uint64_t>(v.v) <= 0xffff;
        case GGUFValueType::U32: return std::get<uint64_t>(v.v) <= 0xffffffff;
        case GGUFValueType::I8: {
            const int64_t x = std::get<int64_t>(v.v);
            return x >= -128 && x <= 127;
        }
        case GGUFValueType::I16: {
            const int64_t x = std::get<int64_t>(v.v);
            return x >= -32768 && x <= 32767;
        }
        case GGUFValueType::I32: {
            const int64_t x = std::get<int64_t>(v.v);
            return x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max();
        }
        default: return true;
    }
}

void check_value(const std::string& key, const GGUFValue& v) {
    if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(GGUFValueType::F64))
        throw GGUFError(fmt::format("key '{}': unknown value type {}", key, static_cast<uint32_t>(v.type)));
    if (!holds_right_alternative(v))
        throw GGUFError(fmt::format("key '{}': the value does not hold a {}", key, gguf_value_type_name(v.type)));
    if (!fits(v))
        throw GGUFError(fmt::format("key '{}': the value does not fit in a {}", key, gguf_value_type_name(v.type)));
    if (v.type != GGUFValueType::ARRAY) return;

    const GGUFArray& a = std::get<GGUFArray>(v.v);
    if (static_cast<uint32_t>(a.elem_type) > static_cast<uint32_t>(GGUFValueType::F64))
        throw GGUFError(fmt::format("key '{}': unknown array element type {}", key, static_cast<uint32_t>(a.elem_type)));
    if (a.elem_type == GGUFValueType::ARRAY)
        throw GGUFError(fmt::format("key '{}': nested arrays are not supported", key));
    if (a.elem_type == GGUFValueType::STRING) {
        if (a.strings.size() != a.count || !a.raw.empty())
            throw GGUFError(fmt::format("key '{}': a string array of count {} holds {} strings", key, a.count, a.strings.size()));
        return;
    }
    const size_t width = gguf_scalar_size(a.elem_type);
    if (!a.strings.empty() || a.count > a.raw.size() / width || a.raw.size() != a.count * width)
        throw GGUFError(fmt::format("key '{}': an array of {} {} needs {} bytes, it holds {}", key, a.count,
                                    gguf_value_type_name(a.elem_type), a.count * width, a.raw.size()));
    if (a.elem_type == GGUFValueType::BOOL)
        for (uint8_t b : a.raw)
            if (b > 1) throw GGUFError(fmt::format("key '{}': a bool array element is {}, not 0 or 1", key, b));
}

void put_value(Sink& s, const GGUFValue& v) {
    switch (v.type) {
        case GGUFValueType::U8: s.put(static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
        case GGUFValueType::U16: s.put(static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
        case GGUFValueType::U32: s.put(static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
        case GGUFValueType::U64: s.put(std::get<uint64_t>(v.v)); break;
        case GGUFValueType::I8: s.put(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
        case GGUFValueType::I16: s.put(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
        case GGUFValueType::I32: s.put(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
        case GGUFValueType::I64: s.put(std::get<int64_t>(v.v)); break;
        case GGUFValueType::F32: s.put(static_cast<float>(std::get<double>(v.v))); break;
        case GGUFValueType::F64: s.put(std::get<double>(v.v)); break;
        case GGUFValueType::BOOL: s.put(static_cast<uint8_t>(std::get<bool>(v.v) ? 1 : 0)); break;
        case GGUFValueType::STRING: s.string(std::get<std::string>(v.v)); break;
        case GGUFValueType::ARRAY: {
            const GGUFArray& a = std::get<GGUFArray>(v.v);
            s.put(static_cast<uint32_t>(a.elem_type));
            s.put<uint64_t>(a.count);
            if (a.elem_type == GGUFValueType::STRING)
                for (const std::string& str : a.strings) s.string(str);
            else
                s.bytes(a.raw.data(), a.raw.size());
            break;
        }
    }
}

GGUFValue array_of(GGUFValueType elem, const void* data, size_t count) {
    GGUFArray a;
    a.elem_type = elem;
    a.count = count;
    const auto* p = static_cast<const uint8_t*>(data);
    a.raw.assign(p, p + count * gguf_scalar_size(elem));
    return {GGUFValueType::ARRAY, std::move(a)};
}

}  // namespace

GGUFWriter::GGUFWriter(uint32_t alignment) : alignment_(alignment) {
    if (!std::has_single_bit(alignment))
        throw GGUFError(fmt::format("GGUF alignment {} is not a nonzero power of two", alignment));
}

void GGUFWriter::set_u32(const std::string& key, uint32_t v) { set_value(key, {GGUFValueType::U32, uint64_t{v}}); }
void GGUFWriter::set_i32(const std::string& key, int32_t v) { set_value(key, {GGUFValueType::I32, int64_t{v}}); }
void GGUFWriter::set_u64(const std::string& key, uint64_t v) { set_value(key, {GGUFValueType::U64, v}); }
void GGUFWriter::set_f32(const std::string& key, float v) { set_value(key, {GGUFValueType::F32, double{v}}); }
void GGUFWriter::set_bool(const std::string& key, bool v) { set_value(key, {GGUFValueType::BOOL, v}); }
void GGUFWriter::set_string(const std::string& key, const std::string& v) { set_value(key, {GGUFValueType::STRING, v}); }

void GGUFWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
    GGUFArray a;
    a.elem_type = GGUFValueType::STRING;
    a.strings = v;
    a.count = v.size();
    set_value(key, {GGUFValueType::ARRAY, std::move(a)});
}

void GGUFWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
    set_value(key, array_of(GGUFValueType::F32, v.data(), v.size()));
}

void GGUFWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
    set_value(key, array_of(GGUFValueType::I32, v.data(), v.size()));
}

void GGUFWriter::set_value(const std::string& key, const GGUFValue& v) {
    check_value(key, v);
    // The data layout follows the writer's alignment, so the key may only repeat it.
    if (key == "general.alignment" &&
        (v.type != GGUFValueType::U32 || std::get<uint64_t>(v.v) != alignment_))
        throw GGUFError(fmt::format("general.alignment must be the u32 {} that this writer aligns to", alignment_));
    // Setting a key twice replaces the value and keeps the first position, so
    // a rewritten file keeps its key order.
    for (auto& [k, old] : kv_) {
        if (k == key) {
            old = v;
            return;
        }
    }
    kv_.emplace_back(key, v);
}

void GGUFWriter::add_tensor(const std::string& name, GGMLType type, std::vector<int64_t> ne,
                            std::vector<uint8_t> data) {
    const uint64_t want = check_tensor(name, type, ne);
    if (data.size() != want)
        throw GGUFError(fmt::format("tensor '{}': {} {} data needs {} bytes, got {}", name, ggml_type_name(type),
                                    fmt::join(ne, "x"), want, data.size()));
    tensors_.push_back({name, type, std::move(ne), std::move(data), want, true});
}

void GGUFWriter::add_tensor_info(const std::string& name, GGMLType type, std::vector<int64_t> ne) {
    const uint64_t nbytes = check_tensor(name, type, ne);
    tensors_.push_back({name, type, std::move(ne), {}, nbytes, false});
}

uint64_t GGUFWriter::check_tensor(const std::string& name, GGMLType type, const std::vector<int64_t>& ne) const {
    if (name.size() > kMaxTensorName)
        throw GGUFError(fmt::format("tensor name '{}' is {} bytes; llama.cpp reads at most {}", name, name.size(), kMaxTensorName));
    for (const Tensor& t : tensors_)
        if (t.name == name) throw GGUFError(fmt::format("duplicate tensor name '{}'", name));
    if (!ggml_type_traits(static_cast<uint32_t>(type)))
        throw GGUFError(fmt::format("tensor '{}': unknown ggml type id {}", name, static_cast<uint32_t>(type)));
    if (ne.empty() || ne.size() > 4)
        throw GGUFError(fmt::format("tensor '{}': {} dimensions, wanted 1..4", name, ne.size()));
    int64_t rows = 1;
    for (size_t i = 0; i < ne.size(); ++i) {
        if (ne[i] < 1) throw GGUFError(fmt::format("tensor '{}': ne[{}] = {}, wanted >= 1", name, i, ne[i]));
        if (i > 0 && __builtin_mul_overflow(rows, ne[i], &rows))
            throw GGUFError(fmt::format("tensor '{}': the element count overflows", name));
    }
    uint64_t want = 0;
    try {
        if (__builtin_mul_overflow(ggml_row_bytes(type, ne[0]), static_cast<uint64_t>(rows), &want))
            throw GGUFError("the byte size overflows");
    } catch (const GGUFError& e) {
        throw GGUFError(fmt::format("tensor '{}': {}", name, e.what()));
    }
    return want;
}

std::vector<uint8_t> GGUFWriter::to_bytes() const {
    for (const Tensor& t : tensors_)
        if (!t.has_data)
            throw GGUFError(fmt::format("tensor '{}' was declared without data (add_tensor_info): stream it after "
                                        "header_bytes() instead", t.name));
    Sink s{header_bytes()};
    // A file without tensors ends with its metadata, as llama.cpp's vocab-only
    // files do: padding would only add bytes (up to the whole alignment).
    if (tensors_.empty()) return std::move(s.out);

    uint64_t total = 0;
    for (const Tensor& t : tensors_) total += align_up(t.nbytes, alignment_);
    s.out.reserve(s.out.size() + total);
    for (const Tensor& t : tensors_) {
        s.bytes(t.data.data(), t.data.size());
        s.pad_to(alignment_);
    }
    return std::move(s.out);
}

std::vector<uint8_t> GGUFWriter::header_bytes() const {
    // A non-default alignment must be in the file, or readers would use 32.
    const bool add_alignment_key = alignment_ != kDefaultAlignment &&
                                   std::none_of(kv_.begin(), kv_.end(), [](const auto& kv) { return kv.first == "general.alignment"; });

    Sink s;
    s.bytes("GGUF", 4);
    s.put<uint32_t>(3);
    s.put<uint64_t>(tensors_.size());
    s.put<uint64_t>(kv_.size() + (add_alignment_key ? 1 : 0));

    for (const auto& [key, value] : kv_) {
        s.string(key);
        s.put(static_cast<uint32_t>(value.type));
        put_value(s, value);
    }
    if (add_alignment_key) {
        s.string("general.alignment");
        s.put(static_cast<uint32_t>(GGUFValueType::U32));
        s.put<uint32_t>(alignment_);
    }

    uint64_t offset = 0;  // from the start of the data section
    for (const Tensor& t : tensors_) {
        s.string(t.name);
        s.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) s.put<uint64_t>(static_cast<uint64_t>(d));
        s.put(static_cast<uint32_t>(t.type));
        s.put<uint64_t>(offset);
        offset += align_up(t.nbytes, alignment_);
    }
    if (!tensors_.empty()) s.pad_to(alignment_);
    return std::move(s.out);
}

void GGUFWriter::write(const std::string& path) const {
    const std::vector<uint8_t> bytes = to_bytes();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw GGUFError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
    const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
    const int write_errno = errno;
    const bool closed = std::fclose(f) == 0;
    if (written != bytes.size())
        throw GGUFError(fmt::format("{}: write failed after {} of {} bytes: {}", path, written, bytes.size(), std::strerror(write_errno)));
    if (!closed) throw GGUFError(fmt::format("{}: cannot finish writing: {}", path, std::strerror(errno)));
}

}  // namespace minfer
