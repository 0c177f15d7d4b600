// The GGUF reader: the validating parser and the typed accessors (the type
// tables are kernels/formats/ggml_type.cpp). Just over 600 lines: the parser
// and the accessors of what it parsed are one idea.
//
// The parser never trusts a number it reads. Every length, count, dimension and
// offset is compared with the bytes that are actually left BEFORE it is used to
// read, allocate or index, so a damaged or hostile file ends in one GGUFError
// ("<path>: offset N: what is wrong") and never in a crash or a huge
// allocation. tests/unit/test_gguf.cpp and tests/fuzz/fuzz_gguf.cpp hold it to
// that. Layout: ../shared/docs/gguf-notes.md.
#include "engine/gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include <fmt/format.h>

namespace minfer {

// Size in the file of a scalar value type; 0 for STRING and ARRAY, which have a
// length prefix instead.
size_t gguf_scalar_size(GGUFValueType t) {
    switch (t) {
        case GGUFValueType::U8:
        case GGUFValueType::I8:
        case GGUFValueType::BOOL: return 1;
        case GGUFValueType::U16:
        case GGUFValueType::I16: return 2;
        case GGUFValueType::U32:
        case GGUFValueType::I32:
        case GGUFValueType::F32: return 4;
        case GGUFValueType::U64:
        case GGUFValueType::I64:
        case GGUFValueType::F64: return 8;
        case GGUFValueType::STRING:
        case GGUFValueType::ARRAY: return 0;
    }
    return 0;
}

// The file is little-endian and the parser copies values straight out of it.
static_assert(std::endian::native == std::endian::little, "minfer's GGUF reader assumes a little-endian host");

namespace {

bool is_value_type(uint32_t id) { return id <= static_cast<uint32_t>(GGUFValueType::F64); }

bool is_unsigned(GGUFValueType t) {
    return t == GGUFValueType::U8 || t == GGUFValueType::U16 || t == GGUFValueType::U32 ||
           t == GGUFValueType::U64;
}
bool is_signed(GGUFValueType t) {
    return t == GGUFValueType::I8 || t == GGUFValueType::I16 || t == GGUFValueType::I32 ||
           t == GGUFValueType::I64;
}

// Names and keys come from the file and may hold any bytes; this makes them
// safe to put in a one-line error message.
std::string printable(std::string_view s) {
    constexpr size_t kMax = 80;
    std::string out;
    for (size_t i = 0; i < s.size() && i < kMax; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\')
            out += static_cast<char>(c);
        else
            out += fmt::format("\\x{:02x}", c);
    }
    if (s.size() > kMax) out += fmt::format("... ({} bytes)", s.size());
    return out;
}

// "u32", or "array of string" for an array value.
std::string describe_type(const GGUFValue& v) {
    if (v.type != GGUFValueType::ARRAY) return gguf_value_type_name(v.type);
    return fmt::format("array of {}", gguf_value_type_name(std::get<GGUFArray>(v.v).elem_type));
}

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

// ---- the bounds-checked cursor ------------------------------------------------

// Reads little-endian values from the file image. Each read checks the bytes
// left first, so running off the end of a truncated file is a GGUFError.
class Reader {
public:
    Reader(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

    uint64_t pos() const { return pos_; }
    uint64_t size() const { return bytes_.size(); }
    uint64_t remaining() const { return bytes_.size() - pos_; }

    template <typename... Args>
    [[noreturn]] void fail(uint64_t at, fmt::format_string<Args...> f, Args&&... args) const {
        throw GGUFError(fmt::format("{}: offset {}: {}", name_, at, fmt::format(f, std::forward<Args>(args)...)));
    }

    // The next n bytes; `what` names them in the error.
    const uint8_t* take(uint64_t n, std::string_view what) {
        if (n > remaining())
            fail(pos_, "truncated: {} needs {} bytes, the file ({} bytes) has {} left", what, n, size(),
                 remaining());
        const uint8_t* p = bytes_.data() + pos_;
        pos_ += n;
        return p;
    }

    template <typename T>
    T scalar(std::string_view what) {
        T v;
        std::memcpy(&v, take(sizeof(T), what), sizeof(T));
        return v;
    }
    uint32_t u32(std::string_view what) { return scalar<uint32_t>(what); }
    uint64_t u64(std::string_view what) { return scalar<uint64_t>(what); }

    // A gguf_string: u64 length, then the bytes (no NUL).
    std::string string(std::string_view what) {
        const uint64_t at = pos_;
        const uint64_t len = u64(what);
        if (len > remaining()) fail(at, "{} length {} exceeds the file ({} bytes)", what, len, size());
        const auto* p = reinterpret_cast<const char*>(take(len, what));
        return std::string(p, len);
    }

private:
    std::span<const uint8_t> bytes_;
    const std::string& name_;
    uint64_t pos_ = 0;
};

// Reserving is only a speed-up, and the counts come from the file: never
// reserve more than this many elements up front, whatever the file claims.
constexpr uint64_t kMaxReserve = 1 << 16;

// The smallest possible KV (empty key, type, 1-byte value) and tensor info
// (empty name, n_dims, one ne, type, offset). A count larger than the bytes
// left divided by these cannot be right.
constexpr uint64_t kMinKVBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

constexpr uint32_t kMaxDims = 4;
constexpr uint32_t kDefaultAlignment = 32;

GGUFArray read_array(Reader& r) {
    GGUFArray a;
    const uint64_t type_at = r.pos();
    const uint32_t elem_id = r.u32("array element type");
    if (!is_value_type(elem_id)) r.fail(type_at, "unknown array element type {}", elem_id);
    a.elem_type = static_cast<GGUFValueType>(elem_id);
    // The spec allows arrays of arrays; llama.cpp rejects them and no model uses them.
    if (a.elem_type == GGUFValueType::ARRAY) r.fail(type_at, "nested arrays are not supported");

    const uint64_t count_at = r.pos();
    a.count = r.u64("array count");
    if (a.elem_type == GGUFValueType::STRING) {
        // Each string has at least its 8-byte length.
        if (a.count > r.remaining() / 8)
            r.fail(count_at, "array of {} strings exceeds the file ({} bytes, {} left)", a.count, r.size(),
                   r.remaining());
        a.strings.reserve(std::min(a.count, kMaxReserve));
        for (uint64_t i = 0; i < a.count; ++i) a.strings.push_back(r.string("string"));
        return a;
    }
    const uint64_t elem_size = gguf_scalar_size(a.elem_type);
    if (a.count > r.remaining() / elem_size)
        r.fail(count_at, "array of {} {} values exceeds the file ({} bytes, {} left)", a.count,
               gguf_value_type_name(a.elem_type), r.size(), r.remaining());
    const uint8_t* p = r.take(a.count * elem_size, "array");
    if (a.elem_type == GGUFValueType::BOOL) {
        for (uint64_t i = 0; i < a.count; ++i)
            if (p[i] > 1) r.fail(count_at + 8 + i, "bool array element {} is {}, not 0 or 1", i, p[i]);
    }
    a.raw.assign(p, p + a.count * elem_size);
    return a;
}

GGUFValue read_value(Reader& r, GGUFValueType type) {
    const uint64_t at = r.pos();
    switch (type) {
        case GGUFValueType::U8: return {type, uint64_t{r.scalar<uint8_t>("u8 value")}};
        case GGUFValueType::U16: return {type, uint64_t{r.scalar<uint16_t>("u16 value")}};
        case GGUFValueType::U32: return {type, uint64_t{r.scalar<uint32_t>("u32 value")}};
        case GGUFValueType::U64: return {type, uint64_t{r.scalar<uint64_t>("u64 value")}};
        case GGUFValueType::I8: return {type, int64_t{r.scalar<int8_t>("i8 value")}};
        case GGUFValueType::I16: return {type, int64_t{r.scalar<int16_t>("i16 value")}};
        case GGUFValueType::I32: return {type, int64_t{r.scalar<int32_t>("i32 value")}};
        case GGUFValueType::I64: return {type, int64_t{r.scalar<int64_t>("i64 value")}};
        case GGUFValueType::F32: return {type, double{r.scalar<float>("f32 value")}};
        case GGUFValueType::F64: return {type, r.scalar<double>("f64 value")};
        case GGUFValueType::BOOL: {
            const uint8_t b = r.scalar<uint8_t>("bool value");
            if (b > 1) r.fail(at, "bool value is {}, not 0 or 1", b);
            return {type, b == 1};
        }
        case GGUFValueType::STRING: return {type, r.string("string")};
        case GGUFValueType::ARRAY: return {type, read_array(r)};
    }
    r.fail(at, "unknown value type {}", static_cast<uint32_t>(type));
}

// One TENSOR_INFO: name, n_dims, ne[n_dims], type, offset. Checks the shape
// and the type; the offset can only be checked once the data section is known,
// so its position goes back through offset_at for the error message.
GGUFTensorInfo read_tensor_info(Reader& r, uint64_t& offset_at) {
    GGUFTensorInfo t;
    t.name = r.string("tensor name");
    const std::string name = printable(t.name);

    const uint64_t dims_at = r.pos();
    const uint32_t n_dims = r.u32("n_dims");
    if (n_dims < 1 || n_dims > kMaxDims) r.fail(dims_at, "tensor '{}': n_dims {} is not in 1..{}", name, n_dims, kMaxDims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t ne_at = r.pos();
        const uint64_t ne = r.u64("a dimension");
        if (ne == 0) r.fail(ne_at, "tensor '{}': ne[{}] is 0", name, d);
        if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            r.fail(ne_at, "tensor '{}': ne[{}] = {} is too large", name, d, ne);
        if (__builtin_mul_overflow(n_elements, static_cast<int64_t>(ne), &n_elements))
            r.fail(ne_at, "tensor '{}': the element count overflows 64 bits", name);
        t.ne.push_back(static_cast<int64_t>(ne));
    }

    const uint64_t type_at = r.pos();
    const uint32_t type_id = r.u32("tensor type");
    const GGMLTypeTraits* traits = ggml_type_traits(type_id);
    if (!traits) r.fail(type_at, "tensor '{}': unknown ggml type id {}", name, type_id);
    t.type = static_cast<GGMLType>(type_id);
    if (t.ne[0] % traits->block_elems != 0)
        r.fail(type_at, "tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", name, t.ne[0],
               traits->name, traits->block_elems);
    // The element count fits in 64 bits, but the byte count may not
    // (2^62 F32 elements are 2^64 bytes): check both products.
    const auto blocks = static_cast<uint64_t>(t.ne[0] / traits->block_elems);
    uint64_t row_bytes = 0;
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(traits->block_bytes), &row_bytes) ||
        __builtin_mul_overflow(row_bytes, static_cast<uint64_t>(t.rows()), &t.nbytes))
        r.fail(type_at, "tensor '{}': the byte size overflows 64 bits", name);

    offset_at = r.pos();
    t.offset = r.u64("tensor offset");
    t.data = nullptr;  // set once the data section is known
    return t;
}

}  // namespace


const char* gguf_value_type_name(GGUFValueType t) {
    switch (t) {
        case GGUFValueType::U8: return "u8";
        case GGUFValueType::I8: return "i8";
        case GGUFValueType::U16: return "u16";
        case GGUFValueType::I16: return "i16";
        case GGUFValueType::U32: return "u32";
        case GGUFValueType::I32: return "i32";
        case GGUFValueType::F32: return "f32";
        case GGUFValueType::BOOL: return "bool";
        case GGUFValueType::STRING: return "string";
        case GGUFValueType::ARRAY: return "array";
        case GGUFValueType::U64: return "u64";
        case GGUFValueType::I64: return "i64";
        case GGUFValueType::F64: return "f64";
    }
    return "?";
}

int64_t GGUFTensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;  // the parser has checked that this cannot overflow
    return n;
}

int64_t GGUFTensorInfo::rows() const {
    int64_t n = 1;
    for (size_t i = 1; i < ne.size(); ++i) n *= ne[i];
    return n;
}

// ---- opening and parsing --------------------------------------------------------

GGUFFile GGUFFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw GGUFError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw GGUFError(fmt::format("{}: cannot stat: {}", path, std::strerror(err)));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw GGUFError(fmt::format("{}: not a regular file", path));
    }

    GGUFFile f;
    f.path_ = path;
    const auto len = static_cast<size_t>(st.st_size);
    if (len > 0) {
        // MAP_PRIVATE + PROT_READ: the weights are used in place and never written back.
        void* p = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            throw GGUFError(fmt::format("{}: cannot mmap {} bytes: {}", path, len, std::strerror(err)));
        }
        f.map_ = p;
        f.map_len_ = len;
    }
    ::close(fd);  // the mapping keeps the file alive
    // If parsing throws, f's destructor unmaps.
    f.parse_all({static_cast<const uint8_t*>(f.map_), f.map_len_});
    return f;
}

GGUFFile GGUFFile::parse(std::span<const uint8_t> bytes, std::string name) {
    GGUFFile f;
    f.path_ = std::move(name);
    f.parse_all(bytes);
    return f;
}

GGUFFile GGUFFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
    GGUFFile f;
    f.path_ = std::move(name);
    f.owned_ = std::move(bytes);
    // Moving a vector keeps its buffer, so the tensor pointers survive moves of f.
    f.parse_all(f.owned_);
    return f;
}

void GGUFFile::parse_all(std::span<const uint8_t> bytes) {
    Reader r(bytes, path_);
    size_ = bytes.size();

    // ---- header
    const uint8_t* magic = r.take(4, "the magic");
    if (std::memcmp(magic, "GGUF", 4) != 0)
        r.fail(0, "not a GGUF file: the magic is {:02x} {:02x} {:02x} {:02x}, not 47 47 55 46 (\"GGUF\")",
               magic[0], magic[1], magic[2], magic[3]);
    version_ = r.u32("the version");
    if (version_ != 2 && version_ != 3) {
        const uint32_t swapped = __builtin_bswap32(version_);
        if (swapped == 2 || swapped == 3)
            r.fail(4, "big-endian GGUF files are not supported");
        if (version_ == 1) r.fail(4, "GGUF version 1 is not supported (it used 32-bit counts); only 2 and 3 are");
        r.fail(4, "GGUF version {} is not supported; only 2 and 3 are", version_);
    }
    const uint64_t tensor_count = r.u64("the tensor count");
    const uint64_t kv_count = r.u64("the metadata count");
    if (tensor_count > r.remaining() / kMinTensorInfoBytes)
        r.fail(8, "tensor count {} exceeds the file ({} bytes)", tensor_count, size_);
    if (kv_count > r.remaining() / kMinKVBytes) r.fail(16, "metadata count {} exceeds the file ({} bytes)", kv_count, size_);

    // ---- metadata
    kv_.reserve(std::min(kv_count, kMaxReserve));
    alignment_ = kDefaultAlignment;
    for (uint64_t i = 0; i < kv_count; ++i) {
        const uint64_t key_at = r.pos();
        std::string key = r.string("key");
        const uint64_t type_at = r.pos();
        const uint32_t type_id = r.u32("value type");
        if (!is_value_type(type_id)) r.fail(type_at, "key '{}': unknown value type {}", printable(key), type_id);
        GGUFValue value = read_value(r, static_cast<GGUFValueType>(type_id));

        if (key == "general.alignment") {
            // llama.cpp reads it as a u32 and needs a power of two to round offsets.
            if (value.type != GGUFValueType::U32)
                r.fail(key_at, "general.alignment has type {}, wanted u32", describe_type(value));
            const uint64_t a = std::get<uint64_t>(value.v);
            if (!std::has_single_bit(a)) r.fail(key_at, "general.alignment {} is not a nonzero power of two", a);
            alignment_ = static_cast<uint32_t>(a);
        }
        if (!kv_index_.emplace(key, kv_.size()).second) r.fail(key_at, "duplicate key '{}'", printable(key));
        kv_.emplace_back(std::move(key), std::move(value));
    }

    // ---- tensor infos
    tensors_.reserve(std::min(tensor_count, kMaxReserve));
    std::vector<uint64_t> offset_field_at;  // where each tensor's offset was read, for error messages
    offset_field_at.reserve(std::min(tensor_count, kMaxReserve));
    for (uint64_t i = 0; i < tensor_count; ++i) {
        const uint64_t name_at = r.pos();
        uint64_t offset_at = 0;
        GGUFTensorInfo t = read_tensor_info(r, offset_at);
        if (tensor_index_.count(t.name)) r.fail(name_at, "duplicate tensor name '{}'", printable(t.name));
        offset_field_at.push_back(offset_at);
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }

    // ---- data section
    // It starts at the next multiple of the alignment. A file without tensors
    // may end before that (llama.cpp's vocab-only files do).
    data_offset_ = align_up(r.pos(), alignment_);
    if (tensors_.empty()) return;
    if (data_offset_ > size_)
        r.fail(r.pos(), "the data section would start at {}, past the end of the file ({} bytes)", data_offset_, size_);
    const uint64_t data_size = size_ - data_offset_;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        GGUFTensorInfo& t = tensors_[i];
        if (t.offset % alignment_ != 0)
            r.fail(offset_field_at[i], "tensor '{}': offset {} is not a multiple of the alignment {}",
                   printable(t.name), t.offset, alignment_);
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            r.fail(offset_field_at[i], "tensor '{}': {} bytes at data offset {} exceed the file ({} bytes, data from {})",
                   printable(t.name), t.nbytes, t.offset, size_, data_offset_);
        t.data = bytes.data() + data_offset_ + t.offset;
    }
    // No two tensors may share bytes. (llama.cpp is stricter: it wants them
    // packed in order; we accept gaps and any order.)
    std::vector<size_t> by_offset(tensors_.size());
    std::iota(by_offset.begin(), by_offset.end(), size_t{0});
    std::sort(by_offset.begin(), by_offset.end(),
              [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
        const GGUFTensorInfo& prev = tensors_[by_offset[k - 1]];
        const GGUFTensorInfo& cur = tensors_[by_offset[k]];
        if (prev.offset + prev.nbytes > cur.offset)  // both are inside the file: no overflow
            r.fail(offset_field_at[by_offset[k]], "tensor '{}' overlaps tensor '{}'", printable(cur.name),
                   printable(prev.name));
    }
}

GGUFFile::GGUFFile(GGUFFile&& o) noexcept
    : path_(std::move(o.path_)),
      version_(o.version_),
      alignment_(o.alignment_),
      size_(o.size_),
      data_offset_(o.data_offset_),
      kv_(std::move(o.kv_)),
      kv_index_(std::move(o.kv_index_)),
      tensors_(std::move(o.tensors_)),
      tensor_index_(std::move(o.tensor_index_)),
      map_(std::exchange(o.map_, nullptr)),
      map_len_(std::exchange(o.map_len_, 0)),
      owned_(std::move(o.owned_)) {}

GGUFFile& GGUFFile::operator=(GGUFFile&& o) noexcept {
    if (this == &o) return *this;
    if (map_) ::munmap(map_, map_len_);
    path_ = std::move(o.path_);
    version_ = o.version_;
    alignment_ = o.alignment_;
    size_ = o.size_;
    data_offset_ = o.data_offset_;
    kv_ = std::move(o.kv_);
    kv_index_ = std::move(o.kv_index_);
    tensors_ = std::move(o.tensors_);
    tensor_index_ = std::move(o.tensor_index_);
    map_ = std::exchange(o.map_, nullptr);
    map_len_ = std::exchange(o.map_len_, 0);
    owned_ = std::move(o.owned_);
    return *this;
}

GGUFFile::~GGUFFile() {
    if (map_) ::munmap(map_, map_len_);
}

// ---- accessors --------------------------------------------------------------

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const GGUFValue& v, std::string_view wanted) {
    throw GGUFError(fmt::format("{}: key '{}' has type {}, wanted {}", path, key, describe_type(v), wanted));
}

}  // namespace

const GGUFValue* GGUFFile::find(std::string_view key) const {
    const auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

// Every typed getter starts here: the value, or "missing key".
static const GGUFValue& require(const GGUFFile& f, std::string_view key) {
    const GGUFValue* v = f.find(key);
    if (!v) throw GGUFError(fmt::format("{}: missing key '{}'", f.path(), key));
    return *v;
}

uint64_t GGUFFile::get_uint(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (is_unsigned(v.type)) return std::get<uint64_t>(v.v);
    if (is_signed(v.type)) {
        const int64_t x = std::get<int64_t>(v.v);
        if (x < 0) throw GGUFError(fmt::format("{}: key '{}' is {} ({}), wanted an unsigned integer", path_, key, x, describe_type(v)));
        return static_cast<uint64_t>(x);
    }
    wrong_type(path_, key, v, "an unsigned integer");
}

int64_t GGUFFile::get_int(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (is_signed(v.type)) return std::get<int64_t>(v.v);
    if (is_unsigned(v.type)) {
        const uint64_t x = std::get<uint64_t>(v.v);
        if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            throw GGUFError(fmt::format("{}: key '{}' is {} ({}), too large for a signed integer", path_, key, x, describe_type(v)));
        return static_cast<int64_t>(x);
    }
    wrong_type(path_, key, v, "an integer");
}

double GGUFFile::get_float(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (v.type == GGUFValueType::F32 || v.type == GGUFValueType::F64) return std::get<double>(v.v);
    wrong_type(path_, key, v, "a float");
}

bool GGUFFile::get_bool(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (v.type == GGUFValueType::BOOL) return std::get<bool>(v.v);
    wrong_type(path_, key, v, "a bool");
}

const std::string& GGUFFile::get_string(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (v.type == GGUFValueType::STRING) return std::get<std::string>(v.v);
    wrong_type(path_, key, v, "a string");
}

const GGUFArray& GGUFFile::get_array(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (v.type == GGUFValueType::ARRAY) return std::get<GGUFArray>(v.v);
    wrong_type(path_, key, v, "an array");
}

const std::vector<std::string>& GGUFFile::get_string_array(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (v.type == GGUFValueType::ARRAY && std::get<GGUFArray>(v.v).elem_type == GGUFValueType::STRING)
        return std::get<GGUFArray>(v.v).strings;
    wrong_type(path_, key, v, "an array of string");
}

std::vector<float> GGUFFile::get_f32_array(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (v.type != GGUFValueType::ARRAY) wrong_type(path_, key, v, "an array of f32");
    const GGUFArray& a = std::get<GGUFArray>(v.v);
    std::vector<float> out(a.count);
    if (a.elem_type == GGUFValueType::F32) {
        if (!a.raw.empty()) std::memcpy(out.data(), a.raw.data(), a.raw.size());  // memcpy(nullptr, ...) is UB
    } else if (a.elem_type == GGUFValueType::F64) {
        for (uint64_t i = 0; i < a.count; ++i) {
            double d;
            std::memcpy(&d, a.raw.data() + 8 * i, 8);
            out[i] = static_cast<float>(d);
        }
    } else {
        wrong_type(path_, key, v, "an array of f32");
    }
    return out;
}

std::vector<int64_t> GGUFFile::get_int_array(std::string_view key) const {
    const GGUFValue& v = require(*this, key);
    if (v.type != GGUFValueType::ARRAY) wrong_type(path_, key, v, "an array of integers");
    const GGUFArray& a = std::get<GGUFArray>(v.v);
    if (!is_signed(a.elem_type) && !is_unsigned(a.elem_type)) wrong_type(path_, key, v, "an array of integers");
    const size_t width = gguf_scalar_size(a.elem_type);
    std::vector<int64_t> out(a.count);
    for (uint64_t i = 0; i < a.count; ++i) {
        const uint8_t* p = a.raw.data() + width * i;
        switch (a.elem_type) {
            case GGUFValueType::U8: out[i] = *p; break;
            case GGUFValueType::I8: out[i] = static_cast<int8_t>(*p); break;
            case GGUFValueType::U16: { uint16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
            case GGUFValueType::I16: { int16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
            case GGUFValueType::U32: { uint32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
            case GGUFValueType::I32: { int32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
            case GGUFValueType::I64: { std::memcpy(&out[i], p, 8); break; }
            case GGUFValueType::U64: {
                uint64_t x;
                std::memcpy(&x, p, 8);
                if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                    throw GGUFError(fmt::format("{}: key '{}': element {} is {}, too large for a signed integer", path_, key, i, x));
                out[i] = static_cast<int64_t>(x);
                break;
            }
            default: break;  // excluded above
        }
    }
    return out;
}

const GGUFTensorInfo* GGUFFile::find_tensor(std::string_view name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GGUFTensorInfo& GGUFFile::tensor(std::string_view name) const {
    const GGUFTensorInfo* t = find_tensor(name);
    if (!t) throw GGUFError(fmt::format("{}: missing tensor '{}'", path_, name));
    return *t;
}

}  // namespace minfer
