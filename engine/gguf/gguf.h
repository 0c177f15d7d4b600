// GGUF files: a validating, memory-mapped reader and a writer.
//
// The reader checks every count, length, type id, dimension and offset against
// the file size before using it, so a damaged file gives one GGUFError naming
// the file, the byte offset and what is wrong, never a crash or a huge
// allocation. Layout notes: ../shared/docs/gguf-notes.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/formats/ggml_type.h"

namespace minfer {


enum class GGUFValueType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_value_type_name(GGUFValueType t);
// Bytes of a scalar value in the file; 0 for STRING and ARRAY (length-prefixed).
size_t gguf_scalar_size(GGUFValueType t);

// One metadata value. Scalars are held widened: U8..U64 as uint64_t, I8..I64
// as int64_t, F32 and F64 as double, BOOL as bool. Arrays keep their element type.
struct GGUFArray {
    GGUFValueType elem_type;
    std::vector<std::string> strings;     // when elem_type == STRING
    std::vector<uint8_t> raw;             // packed little-endian elements otherwise
    uint64_t count = 0;
};
struct GGUFValue {
    GGUFValueType type;
    std::variant<uint64_t, int64_t, double, bool, std::string, GGUFArray> v;
};

struct GGUFTensorInfo {
    std::string name;
    std::vector<int64_t> ne;   // ne[0] is the contiguous dimension (GGUF order)
    GGMLType type;
    uint64_t offset;           // from the start of the data section
    uint64_t nbytes;
    const uint8_t* data;       // into the mapping (nullptr for a file parsed without data)
    int64_t n_elements() const;
    int64_t rows() const;      // product of ne[1..]
};

class GGUFFile {
public:
    // Memory-maps and validates `path`. Throws GGUFError.
    static GGUFFile open(const std::string& path);
    // Validates an in-memory image (fuzzing, tests); `bytes` must outlive the result.
    static GGUFFile parse(std::span<const uint8_t> bytes, std::string name = "<memory>");
    // Validates an in-memory image and keeps it: the result owns `bytes`, so
    // tensor data stays valid as long as the GGUFFile lives (synthetic models).
    static GGUFFile from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

    GGUFFile(GGUFFile&&) noexcept;
    GGUFFile& operator=(GGUFFile&&) noexcept;
    ~GGUFFile();

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t file_size() const { return size_; }
    uint64_t data_offset() const { return data_offset_; }

    // Metadata, in file order.
    const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
    const GGUFValue* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed accessors. A missing key or an incompatible type throws a GGUFError
    // naming the key, the type found and the type wanted. Integer getters accept
    // any integer type whose value fits; float getters accept F32 and F64.
    uint64_t get_uint(std::string_view key) const;
    int64_t get_int(std::string_view key) const;
    double get_float(std::string_view key) const;
    bool get_bool(std::string_view key) const;
    const std::string& get_string(std::string_view key) const;
    const GGUFArray& get_array(std::string_view key) const;
    const std::vector<std::string>& get_string_array(std::string_view key) const;
    std::vector<float> get_f32_array(std::string_view key) const;    // F32 or F64 elements
    std::vector<int64_t> get_int_array(std::string_view key) const;  // any integer elements

    uint64_t get_uint_or(std::string_view key, uint64_t def) const { return has(key) ? get_uint(key) : def; }
    double get_float_or(std::string_view key, double def) const { return has(key) ? get_float(key) : def; }
    bool get_bool_or(std::string_view key, bool def) const { return has(key) ? get_bool(key) : def; }
    std::string get_string_or(std::string_view key, std::string def) const { return has(key) ? get_string(key) : def; }

    const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
    const GGUFTensorInfo* find_tensor(std::string_view name) const;
    // Throws a GGUFError naming the tensor when it is missing.
    const GGUFTensorInfo& tensor(std::string_view name) const;

private:
    GGUFFile() = default;
    void parse_all(std::span<const uint8_t> bytes);

    std::string path_;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    uint64_t size_ = 0;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, GGUFValue>> kv_;
    std::map<std::string, size_t, std::less<>> kv_index_;
    std::vector<GGUFTensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
    void* map_ = nullptr;  // mmap base, or nullptr for parse()
    size_t map_len_ = 0;
    std::vector<uint8_t> owned_;  // the image from_bytes() keeps alive (empty otherwise)
};

// Writes GGUF v3 files that llama.cpp and gguf-py read: keys in insertion order,
// tensors packed in insertion order, each padded to the alignment.
class GGUFWriter {
public:
    explicit GGUFWriter(uint32_t alignment = 32);

    // Setting a key again replaces its value and keeps its first position.
    // general.alignment is written when the alignment is not 32; setting it to
    // anything but the writer's alignment throws.
    void set_u32(const std::string& key, uint32_t v);
    void set_i32(const std::string& key, int32_t v);
    void set_u64(const std::string& key, uint64_t v);
    void set_f32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_string(const std::string& key, const std::string& v);
    void set_string_array(const std::string& key, const std::vector<std::string>& v);
    void set_f32_array(const std::string& key, const std::vector<float>& v);
    void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
    // Copies any value read from another file (used to rewrite files).
    void set_value(const std::string& key, const GGUFValue& v);

    // `data` must hold exactly ggml_row_bytes(type, ne[0]) * rows bytes. Names
    // may have at most 63 bytes (llama.cpp's limit) and must be unique.
    void add_tensor(const std::string& name, GGMLType type, std::vector<int64_t> ne,
                    std::vector<uint8_t> data);

    std::vector<uint8_t> to_bytes() const;
    void write(const std::string& path) const;  // throws GGUFError on I/O failure

    // Streaming, for files too large to hold in memory: declare each tensor
    // with add_tensor_info (name, type and shape; checked as add_tensor does),
    // write header_bytes(), then each tensor's ggml_row_bytes(type, ne[0]) *
    // rows bytes in declaration order, each followed by zero padding to
    // alignment(). to_bytes() and write() refuse a writer holding such tensors.
    void add_tensor_info(const std::string& name, GGMLType type, std::vector<int64_t> ne);
    // The file up to the data section: header, KVs, tensor infos and, when
    // there are tensors, the padding to the alignment.
    std::vector<uint8_t> header_bytes() const;
    uint32_t alignment() const { return alignment_; }

private:
    struct Tensor {
        std::string name;
        GGMLType type;
        std::vector<int64_t> ne;
        std::vector<uint8_t> data;
        uint64_t nbytes = 0;     // data.size(), or the declared size of a streamed tensor
        bool has_data = true;    // false: declared with add_tensor_info
    };
    // Validates a tensor to add; returns its byte size.
    uint64_t check_tensor(const std::string& name, GGMLType type, const std::vector<int64_t>& ne) const;
    uint32_t alignment_;
    std::vector<std::pair<std::string, GGUFValue>> kv_;
    std::vector<Tensor> tensors_;
};

}  // namespace minfer
