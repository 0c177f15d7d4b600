// GGUF reader and writer: round trips, accessors, the real files we ship, and a
// deterministic corruption test (truncations, byte flips, huge counts, bad
// offsets, unknown types, duplicates, bad alignment) that must end in either an
// accepted file or a GGUFError, never a crash, another exception or a huge
// allocation. The libFuzzer target (tests/fuzz/fuzz_gguf.cpp) explores further.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "engine/gguf/gguf.h"

using namespace minfer;

namespace {

const std::string kModel = std::string(MINFER_SOURCE_DIR) + "/models/stories260K.gguf";
const std::string kVocabDir = std::string(MINFER_SHARED_DIR) + "/vocab";

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(T));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

template <typename T>
void put_at(std::vector<uint8_t>& b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
}
template <typename T>
T get_at(const std::vector<uint8_t>& b, size_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof(T));
    return v;
}

// Deterministic filler for tensor data.
std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 7);
    return out;
}

GGUFValue array_value(GGUFValueType elem, std::vector<uint8_t> raw, uint64_t count) {
    GGUFArray a;
    a.elem_type = elem;
    a.raw = std::move(raw);
    a.count = count;
    return {GGUFValueType::ARRAY, std::move(a)};
}

// A small file with every value type, two keys and two tensor names that the
// duplicate tests can turn into copies of each other, and several tensor types.
GGUFWriter small_writer(uint32_t alignment = 32) {
    GGUFWriter w(alignment);
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", "small test file");
    w.set_value("v.u8", {GGUFValueType::U8, uint64_t{200}});
    w.set_value("v.i8", {GGUFValueType::I8, int64_t{-100}});
    w.set_value("v.u16", {GGUFValueType::U16, uint64_t{60000}});
    w.set_value("v.i16", {GGUFValueType::I16, int64_t{-30000}});
    w.set_u32("v.u32", 4000000000u);
    w.set_i32("v.i32", -2000000000);
    w.set_f32("v.f32", 0.25f);
    w.set_bool("v.bool", true);
    w.set_u64("v.u64", 18000000000000000000ull);
    w.set_value("v.i64", {GGUFValueType::I64, int64_t{-9000000000000000000}});
    w.set_value("v.f64", {GGUFValueType::F64, 1e300});
    w.set_string_array("v.strings", {"<unk>", "", "\xe2\x96\x81hello", "<0x0A>"});
    w.set_f32_array("v.f32s", {1.5f, -2.0f, 3.25f});
    w.set_i32_array("v.i32s", {-1, 0, 7});
    w.set_value("v.bools", array_value(GGUFValueType::BOOL, {1, 0, 1}, 3));
    w.set_value("v.u8s", array_value(GGUFValueType::U8, {9, 255}, 2));
    w.set_value("v.u64s", array_value(GGUFValueType::U64, bytes_of<uint64_t>({5, 6}), 2));
    w.set_value("v.f64s", array_value(GGUFValueType::F64, bytes_of<double>({0.5, -8.0}), 2));
    w.set_value("v.empty", array_value(GGUFValueType::I16, {}, 0));
    w.set_u32("dup.a", 1);
    w.set_u32("dup.b", 2);
    w.add_tensor("t.a", GGMLType::F32, {3}, pattern(12, 1));
    w.add_tensor("t.b", GGMLType::F16, {4, 2}, pattern(16, 2));
    w.add_tensor("q8", GGMLType::Q8_0, {64, 3}, pattern(2 * 34 * 3, 3));
    w.add_tensor("q4k", GGMLType::Q4_K, {256, 1, 2}, pattern(144 * 2, 4));
    w.add_tensor("i32", GGMLType::I32, {5}, pattern(20, 5));
    return w;
}

// ---- a walker over a VALID file, for the corruption tests ------------------------
//
// It records where each length, count, type and offset field sits, so that the
// tests can damage exactly those fields. It trusts the file; the reader under
// test is the one that does not.
struct TensorFields {
    size_t n_dims, type, offset;
    std::vector<size_t> ne;
};
struct Layout {
    std::vector<size_t> u64_counts;     // tensor_count, kv_count, key/string lengths, array counts
    std::vector<size_t> value_types;    // u32 value type of each KV
    std::vector<size_t> elem_types;     // u32 element type of each array
    std::vector<size_t> string_bytes;   // one byte inside each (non-empty) string value
    std::vector<size_t> bools;          // scalar bool values
    std::vector<TensorFields> tensors;
    size_t alignment_value = 0;         // the u32 of general.alignment, 0 if absent
    size_t infos_end = 0;               // end of the tensor infos
};

Layout walk(const std::vector<uint8_t>& b) {
    Layout L;
    size_t p = 24;
    auto u32 = [&] { const uint32_t v = get_at<uint32_t>(b, p); p += 4; return v; };
    auto u64 = [&] { const uint64_t v = get_at<uint64_t>(b, p); p += 8; return v; };
    auto str = [&](bool record_byte) {
        L.u64_counts.push_back(p);
        const uint64_t n = u64();
        if (record_byte && n > 0) L.string_bytes.push_back(p + n / 2);
        std::string s(reinterpret_cast<const char*>(b.data() + p), n);
        p += n;
        return s;
    };
    const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    L.u64_counts = {8, 16};
    const uint64_t n_tensors = get_at<uint64_t>(b, 8), n_kv = get_at<uint64_t>(b, 16);
    for (uint64_t i = 0; i < n_kv; ++i) {
        const std::string key = str(false);
        L.value_types.push_back(p);
        const uint32_t t = u32();
        if (key == "general.alignment") L.alignment_value = p;
        if (t == 7) L.bools.push_back(p);
        if (t == 8) {
            str(true);
        } else if (t == 9) {
            L.elem_types.push_back(p);
            const uint32_t et = u32();
            L.u64_counts.push_back(p);
            const uint64_t n = u64();
            for (uint64_t j = 0; j < n; ++j) {
                if (et != 8) {
                    p += sizes[et];
                    continue;
                }
                // Every string of a long array is the same kind of field: damage a few.
                const bool record = j < 6 || j + 1 == n;
                if (record) {
                    str(true);
                } else {
                    p += 8 + get_at<uint64_t>(b, p);
                }
            }
        } else {
            p += sizes[t];
        }
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorFields t{};
        str(false);  // the name
        t.n_dims = p;
        const uint32_t nd = u32();
        for (uint32_t d = 0; d < nd; ++d) t.ne.push_back(p), p += 8;
        t.type = p;
        p += 4;
        t.offset = p;
        p += 8;
        L.tensors.push_back(t);
    }
    L.infos_end = p;
    return L;
}

// ---- running the parser on damaged bytes ------------------------------------------

// Checks what an accepted file promises: every tensor inside the bytes,
// aligned, with the size its shape and type give; the indexes consistent.
void check_invariants(const GGUFFile& f, std::span<const uint8_t> bytes, std::vector<std::string>& problems,
                      const std::string& what) {
    auto problem = [&](const std::string& p) { problems.push_back(what + ": accepted, but " + p); };
    if (f.version() != 2 && f.version() != 3) problem("version " + std::to_string(f.version()));
    if (!std::has_single_bit(f.alignment())) problem("alignment is not a power of two");
    if (f.data_offset() % f.alignment() != 0) problem("misaligned data section");
    for (const auto& [key, v] : f.metadata()) {
        if (f.find(key) != &v) problem("key index mismatch for " + key);
        if (v.type == GGUFValueType::ARRAY) {
            const GGUFArray& a = std::get<GGUFArray>(v.v);
            if (a.elem_type == GGUFValueType::STRING ? a.strings.size() != a.count : a.raw.empty() != (a.count == 0))
                problem("array count mismatch for " + key);
        }
    }
    for (const GGUFTensorInfo& t : f.tensors()) {
        if (f.find_tensor(t.name) != &t) problem("tensor index mismatch");
        if (t.ne.empty() || t.ne.size() > 4) problem("bad n_dims");
        for (int64_t d : t.ne)
            if (d < 1) problem("dimension < 1");
        if (t.nbytes != ggml_row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(t.rows())) problem("wrong nbytes");
        if (t.offset % f.alignment() != 0) problem("misaligned tensor");
        if (t.data != bytes.data() + f.data_offset() + t.offset) problem("data pointer");
        if (f.data_offset() + t.offset + t.nbytes > bytes.size()) problem("tensor past the end");
    }
}

// Runs the parser and keeps a list of everything that is not allowed.
struct Probe {
    std::vector<std::string> problems;
    int accepted = 0;
    int rejected = 0;

    // Returns true when the file was accepted.
    bool run(std::span<const uint8_t> bytes, const std::string& what) {
        std::optional<GGUFFile> f;
        try {
            f.emplace(GGUFFile::parse(bytes, "damaged"));
        } catch (const GGUFError&) {
            ++rejected;
            return false;
        } catch (const std::exception& e) {
            problems.push_back(what + ": " + typeid(e).name() + ": " + e.what());
            return false;
        } catch (...) {
            problems.push_back(what + ": unknown exception");
            return false;
        }
        ++accepted;
        // Outside the try above: a GGUFError from a broken promise (a tensor
        // size that ggml_row_bytes cannot compute, say) is a problem too.
        try {
            check_invariants(*f, bytes, problems, what);
        } catch (const std::exception& e) {
            problems.push_back(what + ": accepted, but checking it threw: " + e.what());
        }
        return true;
    }
    void expect_rejected(std::span<const uint8_t> bytes, const std::string& what) {
        if (run(bytes, what)) problems.push_back(what + ": accepted, but must be rejected");
    }
    void expect_accepted(std::span<const uint8_t> bytes, const std::string& what) {
        const size_t before = problems.size();
        if (!run(bytes, what) && problems.size() == before) problems.push_back(what + ": rejected, but is harmless");
    }
    void report(const char* name) const {
        MESSAGE(std::string(name) << ": " << accepted << " accepted, " << rejected << " rejected, " << problems.size() << " problems");
        std::string first;
        for (size_t i = 0; i < problems.size() && i < 10; ++i) first += problems[i] + "\n";
        CHECK_MESSAGE(problems.empty(), first);
    }
};

// A huge allocation would surface as std::bad_alloc, which Probe counts as a
// problem; this turns "huge" into "1 GiB more than the process maps now"
// instead of whatever the machine would overcommit. (Not under sanitizers,
// which reserve their own address space.)
#if defined(__SANITIZE_ADDRESS__)
#define MINFER_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MINFER_UNDER_ASAN 1
#endif
#endif
struct AddressSpaceLimit {
    rlimit old{};
    bool active = false;
    AddressSpaceLimit() {
#ifndef MINFER_UNDER_ASAN
        long pages = 0;
        if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
            if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
            std::fclose(f);
        }
        if (pages <= 0 || getrlimit(RLIMIT_AS, &old) != 0) return;
        rlimit lim = old;
        const rlim_t want = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 30);
        if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < want) return;
        lim.rlim_cur = want;
        active = setrlimit(RLIMIT_AS, &lim) == 0;
#endif
    }
    ~AddressSpaceLimit() {
        if (active) setrlimit(RLIMIT_AS, &old);
    }
};

// Truncations and byte flips over a whole file: at every offset below
// `dense_end`, every `stride`-th one after it. Tensor data lives in
// [data_begin, data_end): a flip there is harmless and must be accepted, and a
// truncation anywhere before data_end must be rejected.
void flip_and_truncate(Probe& probe, std::vector<uint8_t> b, size_t dense_end, size_t stride, size_t data_begin,
                       size_t data_end) {
    const std::span<const uint8_t> all(b);
    for (size_t n = 0; n < b.size(); n += (n < dense_end ? 1 : stride)) {
        const std::string what = "truncated to " + std::to_string(n);
        if (n < data_end)
            probe.expect_rejected(all.first(n), what);
        else
            probe.run(all.first(n), what);
    }
    for (size_t at = 0; at < b.size(); at += (at < dense_end ? 1 : stride)) {
        for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x01}}) {
            b[at] ^= mask;
            const std::string what = "byte " + std::to_string(at) + " ^ " + std::to_string(mask);
            if (at >= data_begin && at < data_end)
                probe.expect_accepted(all, what);
            else
                probe.run(all, what);
            b[at] ^= mask;
        }
    }
}

// Writes evil values into every count, length, type and offset field.
void damage_fields(Probe& probe, std::vector<uint8_t> b, const Layout& L, uint32_t alignment) {
    const std::span<const uint8_t> all(b);
    const uint64_t size = b.size();
    auto with_u64 = [&](size_t at, uint64_t v, bool must_reject) {
        const uint64_t old = get_at<uint64_t>(b, at);
        put_at(b, at, v);
        const std::string what = "u64 at " + std::to_string(at) + " = " + std::to_string(v);
        must_reject ? probe.expect_rejected(all, what) : (void)probe.run(all, what);
        put_at(b, at, old);
    };
    auto with_u32 = [&](size_t at, uint32_t v, bool must_reject) {
        const uint32_t old = get_at<uint32_t>(b, at);
        put_at(b, at, v);
        const std::string what = "u32 at " + std::to_string(at) + " = " + std::to_string(v);
        must_reject ? probe.expect_rejected(all, what) : (void)probe.run(all, what);
        put_at(b, at, old);
    };
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

    // Counts and lengths: anything near 2^64 can never fit; smaller lies may
    // happen to parse (a shorter array count, say), and then must be consistent.
    for (size_t at : L.u64_counts) {
        const uint64_t v = get_at<uint64_t>(b, at);
        for (uint64_t huge : {kMax, kMax - 1, kMax / 2 + 1, kMax / 8, uint64_t{1} << 40, size, size + 1})
            with_u64(at, huge, true);
        for (uint64_t lie : {uint64_t{0}, v + 1, v - 1, v * 2, uint64_t{1} << 32, size / 8, size / 2})
            with_u64(at, lie, false);
    }
    // Value and element types: unknown ids are rejected; a wrong known type may parse.
    for (size_t at : L.value_types) {
        for (uint32_t t : {13u, 100u, 0x80000000u, 0xffffffffu}) with_u32(at, t, true);
        for (uint32_t t = 0; t <= 12; ++t) with_u32(at, t, false);
    }
    for (size_t at : L.elem_types) {
        for (uint32_t t : {9u, 13u, 0xffffffffu}) with_u32(at, t, true);  // 9: nested array
        for (uint32_t t = 0; t <= 12; ++t) with_u32(at, t, false);
    }
    for (size_t at : L.string_bytes) {  // a string's content is not checked: harmless
        b[at] ^= 0x5a;
        probe.expect_accepted(all, "string byte " + std::to_string(at));
        b[at] ^= 0x5a;
    }
    for (size_t at : L.bools) {
        for (uint8_t v : {uint8_t{2}, uint8_t{0xff}}) {
            const uint8_t old = b[at];
            b[at] = v;
            probe.expect_rejected(all, "bool at " + std::to_string(at));
            b[at] = old;
        }
    }

    for (size_t i = 0; i < L.tensors.size(); ++i) {
        const TensorFields& t = L.tensors[i];
        const std::string id = " (tensor " + std::to_string(i) + ")";
        for (uint32_t nd : {0u, 5u, 0xffffffffu}) with_u32(t.n_dims, nd, true);
        for (uint32_t nd : {1u, 2u, 3u, 4u}) with_u32(t.n_dims, nd, false);
        for (size_t at : t.ne) {
            // 0, too large for int64, and products that overflow or exceed the file.
            for (uint64_t ne : {uint64_t{0}, kMax, uint64_t{1} << 63, uint64_t{1} << 62, uint64_t{1} << 32, size})
                with_u64(at, ne, true);
            with_u64(at, get_at<uint64_t>(b, at) + 1, false);
        }
        // Retired, IQ and nonsense type ids.
        for (uint32_t type : {4u, 5u, 16u, 20u, 23u, 29u, 31u, 39u, 1000u, 0xffffffffu}) with_u32(t.type, type, true);
        for (uint32_t type : {0u, 1u, 2u, 8u, 12u, 14u, 24u, 28u, 30u}) with_u32(t.type, type, false);

        // Offsets: past the end, misaligned, on top of another tensor.
        const uint64_t off = get_at<uint64_t>(b, t.offset);
        for (uint64_t o : {size, size - 1, kMax, kMax - alignment + 1, off + 1, off + alignment / 2, off + alignment - 1})
            with_u64(t.offset, o, true);
        if (alignment > 1) with_u64(t.offset, off + 1, true);
        if (i > 0) with_u64(t.offset, get_at<uint64_t>(b, L.tensors[i - 1].offset), true);
        with_u64(t.offset, 0, i > 0);  // tensor 0 sits at 0 already
    }
}

}  // namespace

// ---- type traits -------------------------------------------------------------------

TEST_CASE("gguf: ggml type traits match gguf-py's GGML_QUANT_SIZES") {
    struct Row {
        GGMLType t;
        const char* name;
        int64_t elems, bytes;
    };
    const Row rows[] = {
        {GGMLType::F32, "F32", 1, 4},      {GGMLType::F16, "F16", 1, 2},       {GGMLType::BF16, "BF16", 1, 2},
        {GGMLType::Q4_0, "Q4_0", 32, 18},  {GGMLType::Q4_1, "Q4_1", 32, 20},   {GGMLType::Q5_0, "Q5_0", 32, 22},
        {GGMLType::Q5_1, "Q5_1", 32, 24},  {GGMLType::Q8_0, "Q8_0", 32, 34},   {GGMLType::Q8_1, "Q8_1", 32, 40},
        {GGMLType::Q2_K, "Q2_K", 256, 84}, {GGMLType::Q3_K, "Q3_K", 256, 110}, {GGMLType::Q4_K, "Q4_K", 256, 144},
        {GGMLType::Q5_K, "Q5_K", 256, 176}, {GGMLType::Q6_K, "Q6_K", 256, 210}, {GGMLType::Q8_K, "Q8_K", 256, 292},
        {GGMLType::I8, "I8", 1, 1},        {GGMLType::I16, "I16", 1, 2},       {GGMLType::I32, "I32", 1, 4},
        {GGMLType::I64, "I64", 1, 8},      {GGMLType::F64, "F64", 1, 8},
    };
    for (const Row& r : rows) {
        const GGMLTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(r.t));
        REQUIRE(tr != nullptr);
        CHECK(std::string(tr->name) == r.name);
        CHECK(std::string(ggml_type_name(r.t)) == r.name);
        CHECK(tr->block_elems == r.elems);
        CHECK(tr->block_bytes == r.bytes);
        CHECK(ggml_row_bytes(r.t, r.elems * 3) == static_cast<uint64_t>(r.bytes * 3));
    }
    for (uint32_t unknown : {4u, 5u, 16u, 29u, 31u, 1000u}) CHECK(ggml_type_traits(unknown) == nullptr);
    CHECK(std::string(ggml_type_name(static_cast<GGMLType>(4))) == "?");
    CHECK(ggml_row_bytes(GGMLType::F32, 172) == 688);
    CHECK(ggml_row_bytes(GGMLType::Q8_0, 0) == 0);
    CHECK_THROWS_WITH_AS(ggml_row_bytes(GGMLType::Q8_0, 172), doctest::Contains("172"), GGUFError);
    CHECK_THROWS_AS(ggml_row_bytes(GGMLType::Q4_K, -256), GGUFError);
    CHECK_THROWS_AS(ggml_row_bytes(static_cast<GGMLType>(99), 32), GGUFError);
    CHECK(std::string(gguf_value_type_name(GGUFValueType::F32)) == "f32");
    CHECK(std::string(gguf_value_type_name(static_cast<GGUFValueType>(77))) == "?");
}

// ---- writer round trips --------------------------------------------------------------

TEST_CASE("gguf: every value type survives a round trip, in insertion order") {
    const std::vector<uint8_t> bytes = small_writer().to_bytes();
    const GGUFFile f = GGUFFile::parse(bytes);
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 32);
    CHECK(f.file_size() == bytes.size());

    const std::vector<std::string> keys = {
        "general.architecture", "general.name", "v.u8", "v.i8", "v.u16", "v.i16", "v.u32", "v.i32",
        "v.f32", "v.bool", "v.u64", "v.i64", "v.f64", "v.strings", "v.f32s", "v.i32s", "v.bools",
        "v.u8s", "v.u64s", "v.f64s", "v.empty", "dup.a", "dup.b"};  // 32-byte alignment: no general.alignment
    REQUIRE(f.metadata().size() == keys.size());
    for (size_t i = 0; i < keys.size(); ++i) CHECK(f.metadata()[i].first == keys[i]);

    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.find("v.u8")->type == GGUFValueType::U8);
    CHECK(f.get_uint("v.u8") == 200);
    CHECK(f.find("v.i8")->type == GGUFValueType::I8);
    CHECK(f.get_int("v.i8") == -100);
    CHECK(f.get_uint("v.u16") == 60000);
    CHECK(f.get_int("v.i16") == -30000);
    CHECK(f.get_uint("v.u32") == 4000000000u);
    CHECK(f.get_int("v.i32") == -2000000000);
    CHECK(f.get_float("v.f32") == 0.25);
    CHECK(f.get_bool("v.bool") == true);
    CHECK(f.get_uint("v.u64") == 18000000000000000000ull);
    CHECK(f.get_int("v.i64") == -9000000000000000000);
    CHECK(f.get_float("v.f64") == 1e300);
    CHECK(f.get_string_array("v.strings") == std::vector<std::string>{"<unk>", "", "\xe2\x96\x81hello", "<0x0A>"});
    CHECK(f.get_f32_array("v.f32s") == std::vector<float>{1.5f, -2.0f, 3.25f});
    CHECK(f.get_int_array("v.i32s") == std::vector<int64_t>{-1, 0, 7});
    CHECK(f.get_array("v.bools").raw == std::vector<uint8_t>{1, 0, 1});
    CHECK(f.get_int_array("v.u8s") == std::vector<int64_t>{9, 255});
    CHECK(f.get_int_array("v.u64s") == std::vector<int64_t>{5, 6});
    CHECK(f.get_f32_array("v.f64s") == std::vector<float>{0.5f, -8.0f});
    CHECK(f.get_array("v.empty").count == 0);
    CHECK(f.get_array("v.empty").elem_type == GGUFValueType::I16);

    // Copying every value through set_value reproduces the file byte for byte.
    GGUFWriter copy;
    for (const auto& [k, v] : f.metadata()) copy.set_value(k, v);
    for (const GGUFTensorInfo& t : f.tensors())
        copy.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    CHECK(copy.to_bytes() == bytes);
}

TEST_CASE("gguf: a file without tensors ends right after its metadata") {
    GGUFWriter w(1 << 30);  // no padding, whatever the alignment
    w.set_string("tokenizer.ggml.model", "llama");
    const std::vector<uint8_t> bytes = w.to_bytes();
    // header 24 + key (8 + 20) + type 4 + value (8 + 5) + general.alignment (8 + 17 + 4 + 4)
    CHECK(bytes.size() == 24 + 28 + 4 + 13 + 33);
    const GGUFFile f = GGUFFile::parse(bytes);
    CHECK(f.tensors().empty());
    CHECK(f.alignment() == 1u << 30);
    CHECK(f.get_string("tokenizer.ggml.model") == "llama");
}

TEST_CASE("gguf: setting a key twice replaces the value in place") {
    GGUFWriter w;
    w.set_u32("a", 1);
    w.set_u32("b", 2);
    w.set_string("a", "now a string");
    const std::vector<uint8_t> bytes = w.to_bytes();
    const GGUFFile f = GGUFFile::parse(bytes);
    REQUIRE(f.metadata().size() == 2);
    CHECK(f.metadata()[0].first == "a");
    CHECK(f.get_string("a") == "now a string");
}

TEST_CASE("gguf: tensors are packed in order, padded to the alignment") {
    for (uint32_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
        CAPTURE(alignment);
        const std::vector<uint8_t> bytes = small_writer(alignment).to_bytes();
        const GGUFFile f = GGUFFile::parse(bytes);
        CHECK(f.alignment() == alignment);
        CHECK(f.has("general.alignment") == (alignment != 32));
        if (alignment != 32) CHECK(f.get_uint("general.alignment") == alignment);
        CHECK(f.data_offset() % alignment == 0);
        CHECK(bytes.size() % alignment == 0);  // trailing padding after the last tensor

        REQUIRE(f.tensors().size() == 5);
        const char* names[] = {"t.a", "t.b", "q8", "q4k", "i32"};
        uint64_t expect_offset = 0;
        uint8_t seed = 1;
        for (size_t i = 0; i < 5; ++i) {
            const GGUFTensorInfo& t = f.tensors()[i];
            CHECK(t.name == names[i]);
            CHECK(t.offset == expect_offset);  // llama.cpp's strict packing rule
            CHECK(t.data == bytes.data() + f.data_offset() + t.offset);
            CHECK(std::vector<uint8_t>(t.data, t.data + t.nbytes) == pattern(t.nbytes, seed++));
            expect_offset += (t.nbytes + alignment - 1) / alignment * alignment;
        }
        CHECK(f.data_offset() + expect_offset == bytes.size());
        const GGUFTensorInfo& q4k = f.tensor("q4k");
        CHECK(q4k.type == GGMLType::Q4_K);
        CHECK(q4k.ne == std::vector<int64_t>{256, 1, 2});
        CHECK(q4k.n_elements() == 512);
        CHECK(q4k.rows() == 2);
        CHECK(q4k.nbytes == 288);
        CHECK(f.tensor("t.a").rows() == 1);
    }
}

TEST_CASE("gguf: write() and open() through a real file") {
    const auto dir = std::filesystem::temp_directory_path() / ("minfer_test_gguf_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "small.gguf").string();
    small_writer(64).write(path);
    {
        GGUFFile f = GGUFFile::open(path);
        CHECK(f.path() == path);
        CHECK(f.tensors().size() == 5);
        CHECK(f.alignment() == 64);
        // Moving the file keeps the mapping and the tensor pointers valid.
        const uint8_t* data = f.tensor("q8").data;
        GGUFFile moved = std::move(f);
        CHECK(moved.tensor("q8").data == data);
        CHECK(data[0] == pattern(1, 3)[0]);
    }
    CHECK_THROWS_WITH_AS(GGUFFile::open((dir / "missing.gguf").string()), doctest::Contains("missing.gguf: cannot open: No such file"), GGUFError);
    CHECK_THROWS_WITH_AS(GGUFFile::open(dir.string()), doctest::Contains("not a regular file"), GGUFError);
    const std::string empty = (dir / "empty.gguf").string();
    std::ofstream(empty).close();
    CHECK_THROWS_WITH_AS(GGUFFile::open(empty), doctest::Contains("empty.gguf: offset 0: truncated"), GGUFError);
    CHECK_THROWS_WITH_AS(GGUFWriter().write((dir / "no/such/dir.gguf").string()), doctest::Contains("cannot create"), GGUFError);
    std::filesystem::remove_all(dir);
}

TEST_CASE("gguf: the writer rejects what it cannot write") {
    CHECK_THROWS_AS(GGUFWriter(0), GGUFError);
    CHECK_THROWS_AS(GGUFWriter(48), GGUFError);
    GGUFWriter w;
    w.add_tensor("x", GGMLType::F32, {2}, pattern(8, 0));
    CHECK_THROWS_WITH_AS(w.add_tensor("x", GGMLType::F32, {2}, pattern(8, 0)), doctest::Contains("duplicate tensor name 'x'"), GGUFError);
    CHECK_THROWS_WITH_AS(w.add_tensor("y", GGMLType::F32, {2}, pattern(7, 0)), doctest::Contains("needs 8 bytes, got 7"), GGUFError);
    CHECK_THROWS_WITH_AS(w.add_tensor("y", GGMLType::Q8_0, {172}, {}), doctest::Contains("tensor 'y'"), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {}, {}), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {1, 1, 1, 1, 1}, pattern(4, 0)), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {2, 0}, {}), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {int64_t{1} << 40, int64_t{1} << 40}, {}), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", static_cast<GGMLType>(4), {32}, pattern(20, 0)), GGUFError);
    CHECK_THROWS_AS(w.add_tensor(std::string(64, 'n'), GGMLType::F32, {1}, pattern(4, 0)), GGUFError);
    w.add_tensor(std::string(63, 'n'), GGMLType::F32, {1}, pattern(4, 0));

    CHECK_THROWS_AS(w.set_u32("general.alignment", 64), GGUFError);
    w.set_u32("general.alignment", 32);
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::U8, uint64_t{256}}), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::I32, uint64_t{1}}), GGUFError);  // wrong alternative
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::I8, int64_t{-129}}), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", {static_cast<GGUFValueType>(13), uint64_t{1}}), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", array_value(GGUFValueType::ARRAY, {}, 0)), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", array_value(GGUFValueType::U32, {1, 2, 3}, 1)), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", array_value(GGUFValueType::BOOL, {2}, 1)), GGUFError);
    GGUFArray strings;
    strings.elem_type = GGUFValueType::STRING;
    strings.strings = {"a"};
    strings.count = 2;
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::ARRAY, strings}), GGUFError);
    CHECK(GGUFFile::parse(w.to_bytes()).tensors().size() == 2);
}

// ---- accessors --------------------------------------------------------------------------

TEST_CASE("gguf: typed accessors convert what fits and name the key when they fail") {
    const std::vector<uint8_t> bytes = small_writer().to_bytes();
    const GGUFFile f = GGUFFile::parse(bytes, "small.gguf");

    // Integers cross signedness when the value fits.
    CHECK(f.get_int("v.u32") == 4000000000);
    CHECK(f.get_uint("dup.a") == 1);
    GGUFWriter w;
    w.set_i32("positive", 7);
    w.set_i32("negative", -7);
    const std::vector<uint8_t> wb = w.to_bytes();
    const GGUFFile g = GGUFFile::parse(wb, "g.gguf");
    CHECK(g.get_uint("positive") == 7);
    CHECK_THROWS_WITH_AS(g.get_uint("negative"), doctest::Contains("key 'negative' is -7 (i32), wanted an unsigned integer"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int("v.u64"), doctest::Contains("key 'v.u64' is 18000000000000000000 (u64), too large"), GGUFError);

    // Missing keys and wrong types.
    CHECK_THROWS_WITH_AS(f.get_uint("llama.block_count"), "small.gguf: missing key 'llama.block_count'", GGUFError);
    CHECK_THROWS_WITH_AS(f.get_uint("general.name"), "small.gguf: key 'general.name' has type string, wanted an unsigned integer", GGUFError);
    CHECK_THROWS_WITH_AS(f.get_uint("v.bool"), doctest::Contains("key 'v.bool' has type bool, wanted an unsigned integer"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int("v.f32"), doctest::Contains("key 'v.f32' has type f32, wanted an integer"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_float("v.u32"), doctest::Contains("key 'v.u32' has type u32, wanted a float"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_bool("v.u8"), doctest::Contains("key 'v.u8' has type u8, wanted a bool"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_string("v.strings"), doctest::Contains("key 'v.strings' has type array of string, wanted a string"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_array("v.u8"), doctest::Contains("key 'v.u8' has type u8, wanted an array"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_string_array("v.f32s"), doctest::Contains("key 'v.f32s' has type array of f32, wanted an array of string"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_f32_array("v.i32s"), doctest::Contains("key 'v.i32s' has type array of i32, wanted an array of f32"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int_array("v.strings"), doctest::Contains("key 'v.strings' has type array of string, wanted an array of integers"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int_array("v.bools"), doctest::Contains("wanted an array of integers"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_f32_array("missing"), "small.gguf: missing key 'missing'", GGUFError);

    // Defaults only apply when the key is absent; a present key of the wrong type still throws.
    CHECK(f.get_uint_or("absent", 5) == 5);
    CHECK(f.get_uint_or("v.u8", 5) == 200);
    CHECK(f.get_float_or("absent", 1e4) == 1e4);
    CHECK(f.get_bool_or("absent", true) == true);
    CHECK(f.get_string_or("absent", "x") == "x");
    CHECK_THROWS_AS(f.get_uint_or("general.name", 5), GGUFError);

    CHECK(f.find_tensor("nope") == nullptr);
    CHECK_THROWS_WITH_AS(f.tensor("blk.0.attn_q.weight"), "small.gguf: missing tensor 'blk.0.attn_q.weight'", GGUFError);
}

// ---- real files ----------------------------------------------------------------------------

TEST_CASE("gguf: the bundled stories260K model") {
    const GGUFFile f = GGUFFile::open(kModel);
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 32);
    CHECK(f.file_size() == 1054368);
    CHECK(f.data_offset() == 14240);

    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.find("llama.block_count")->type == GGUFValueType::U32);  // llama.cpp reads u32 exactly
    CHECK(f.get_uint("llama.context_length") == 512);
    CHECK(f.get_uint("llama.embedding_length") == 64);
    CHECK(f.get_uint("llama.block_count") == 5);
    CHECK(f.get_uint("llama.feed_forward_length") == 172);
    CHECK(f.get_uint("llama.attention.head_count") == 8);
    CHECK(f.get_uint("llama.attention.head_count_kv") == 4);
    CHECK(f.get_uint("llama.rope.dimension_count") == 8);
    CHECK(f.get_float("llama.rope.freq_base") == 10000.0);
    CHECK(f.get_float("llama.attention.layer_norm_rms_epsilon") == doctest::Approx(1e-5).epsilon(1e-6));
    CHECK(f.get_string("tokenizer.ggml.model") == "llama");
    CHECK(f.get_uint("tokenizer.ggml.bos_token_id") == 1);
    CHECK(f.get_uint("tokenizer.ggml.eos_token_id") == 2);
    const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 512);
    CHECK(tokens[0] == "<unk>");
    CHECK(tokens[1] == "<s>");
    CHECK(tokens[2] == "</s>");
    CHECK(tokens[3] == "<0x00>");
    CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == 512);
    CHECK(f.get_int_array("tokenizer.ggml.token_type").size() == 512);

    REQUIRE(f.tensors().size() == 47);
    CHECK(f.find_tensor("output.weight") == nullptr);  // tied to token_embd.weight
    CHECK(f.tensor("token_embd.weight").ne == std::vector<int64_t>{64, 512});
    CHECK(f.tensor("output_norm.weight").ne == std::vector<int64_t>{64});
    CHECK(f.tensor("blk.4.ffn_down.weight").ne == std::vector<int64_t>{172, 64});
    CHECK(f.tensor("blk.0.ffn_gate.weight").ne == std::vector<int64_t>{64, 172});
    CHECK(f.tensor("blk.0.attn_k.weight").ne == std::vector<int64_t>{64, 32});
    int64_t params = 0;
    uint64_t expect_offset = 0;
    for (const GGUFTensorInfo& t : f.tensors()) {
        CHECK(t.type == GGMLType::F32);
        CHECK(t.offset == expect_offset);
        expect_offset += (t.nbytes + 31) / 32 * 32;
        params += t.n_elements();
    }
    CHECK(params == 260032);  // "260K"
    CHECK(f.data_offset() + expect_offset == f.file_size());
    // The first weight of token_embd.weight, read through the mapping.
    const std::vector<uint8_t> bytes = read_file(kModel);  // parse() does not copy: keep the bytes alive
    const GGUFFile copy = GGUFFile::parse(bytes);
    float w0 = 0, w1 = 0;
    std::memcpy(&w0, f.tensor("token_embd.weight").data, 4);
    std::memcpy(&w1, copy.tensor("token_embd.weight").data, 4);
    CHECK(w0 == w1);
}

TEST_CASE("gguf: the vocab-only files in ../shared/vocab") {
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kVocabDir)) {
        if (entry.path().extension() != ".gguf") continue;
        CAPTURE(entry.path().string());
        const GGUFFile f = GGUFFile::open(entry.path().string());
        CHECK(f.tensors().empty());
        CHECK(f.version() == 3);
        const std::string model = f.get_string("tokenizer.ggml.model");
        CHECK((model == "llama" || model == "gpt2" || model == "bert"));
        const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
        CHECK(tokens.size() > 1000);
        if (f.has("tokenizer.ggml.token_type")) CHECK(f.get_int_array("tokenizer.ggml.token_type").size() == tokens.size());
        if (f.has("tokenizer.ggml.scores")) CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == tokens.size());
        if (model == "gpt2") CHECK(!f.get_string_array("tokenizer.ggml.merges").empty());
        ++n;
    }
    CHECK(n >= 12);
    // The llama SPM vocab has no padding after its metadata: it ends mid-"alignment".
    const GGUFFile spm = GGUFFile::open(kVocabDir + "/ggml-vocab-llama-spm.gguf");
    CHECK(spm.get_string_array("tokenizer.ggml.tokens").size() == 32000);
    CHECK(spm.file_size() == 723869);
    CHECK(spm.data_offset() == 723872);
}

// ---- versions and headers -------------------------------------------------------------

TEST_CASE("gguf: versions 2 and 3 only, with clear messages") {
    std::vector<uint8_t> b = small_writer().to_bytes();
    put_at<uint32_t>(b, 4, 2);
    CHECK(GGUFFile::parse(b).version() == 2);  // same layout as v3
    put_at<uint32_t>(b, 4, 1);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(b, "x.gguf"), doctest::Contains("x.gguf: offset 4: GGUF version 1 is not supported"), GGUFError);
    put_at<uint32_t>(b, 4, 4);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(b, "x.gguf"), doctest::Contains("x.gguf: offset 4: GGUF version 4 is not supported"), GGUFError);
    put_at<uint32_t>(b, 4, 0x03000000);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(b), doctest::Contains("big-endian"), GGUFError);
    put_at<uint32_t>(b, 4, 3);
    b[0] = 'g';
    CHECK_THROWS_WITH_AS(GGUFFile::parse(b), doctest::Contains("not a GGUF file"), GGUFError);
}

TEST_CASE("gguf: error messages name the file, the offset and the problem") {
    std::vector<uint8_t> model = read_file(kModel);
    put_at<uint64_t>(model, 24, std::numeric_limits<uint64_t>::max());  // the first key's length
    CHECK_THROWS_WITH_AS(GGUFFile::parse(model, "stories260K.gguf"),
                         "stories260K.gguf: offset 24: key length 18446744073709551615 exceeds the file (1054368 bytes)",
                         GGUFError);
    model = read_file(kModel);
    put_at<uint64_t>(model, 8, uint64_t{1} << 60);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(model, "m"), doctest::Contains("m: offset 8: tensor count 1152921504606846976 exceeds the file"), GGUFError);

    std::vector<uint8_t> small = small_writer().to_bytes();
    const Layout L = walk(small);
    put_at<uint64_t>(small, L.tensors[2].offset, 33);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(small, "s"), doctest::Contains("tensor 'q8': offset 33 is not a multiple of the alignment 32"), GGUFError);
    put_at<uint64_t>(small, L.tensors[2].offset, 0);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(small, "s"), doctest::Contains("overlaps"), GGUFError);
    put_at<uint64_t>(small, L.tensors[2].offset, 1 << 20);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(small, "s"), doctest::Contains("tensor 'q8': 204 bytes at data offset 1048576 exceed the file"), GGUFError);
}

// ---- the corruption test -------------------------------------------------------------------
//
// Deterministic: the same damage every run, so a failure reproduces.

TEST_CASE("gguf: damaged copies of a writer-made file are accepted or rejected cleanly") {
    AddressSpaceLimit limit;
    for (uint32_t alignment : {32u, 64u}) {
        CAPTURE(alignment);
        const std::vector<uint8_t> b = small_writer(alignment).to_bytes();
        const GGUFFile good = GGUFFile::parse(b);
        const GGUFTensorInfo& last = good.tensors().back();
        const size_t data_end = good.data_offset() + last.offset + last.nbytes;
        const Layout L = walk(b);
        Probe probe;
        flip_and_truncate(probe, b, b.size(), 1, good.data_offset(), data_end);
        damage_fields(probe, b, L, alignment);
        probe.report("writer-made file");
    }
}

TEST_CASE("gguf: damaged copies of stories260K are accepted or rejected cleanly") {
    AddressSpaceLimit limit;
    const std::vector<uint8_t> b = read_file(kModel);
    const Layout L = walk(b);
    REQUIRE(L.infos_end == 14225);  // then 15 bytes of padding to 14240
    Probe probe;
    // Every offset up to the data section, every 997th byte after it.
    flip_and_truncate(probe, b, 14240, 997, 14240, b.size());
    damage_fields(probe, b, L, 32);
    probe.report("stories260K");
}

TEST_CASE("gguf: damaged copies of a vocab-only file are accepted or rejected cleanly") {
    AddressSpaceLimit limit;
    std::vector<uint8_t> b = read_file(kVocabDir + "/ggml-vocab-llama-spm.gguf");
    Probe probe;
    // The whole file is metadata, so any truncation is fatal. Its first KiB
    // (header, small keys) is damaged at every offset, the rest sampled.
    flip_and_truncate(probe, b, 1024, 1499, b.size(), b.size());
    probe.report("vocab-only");
}

TEST_CASE("gguf: duplicates, bad alignments and unknown types are rejected") {
    AddressSpaceLimit limit;
    Probe probe;
    std::vector<uint8_t> b = small_writer(64).to_bytes();
    const Layout L = walk(b);

    // Rename "dup.b" to "dup.a" and "t.b" to "t.a".
    const std::pair<std::string, std::string> renames[] = {{"dup.b", "duplicate key 'dup.a'"},
                                                           {"t.b", "duplicate tensor name 't.a'"}};
    for (const auto& [name, message] : renames) {
        const auto it = std::search(b.begin(), b.end(), name.begin(), name.end());
        REQUIRE(it != b.end());
        std::vector<uint8_t> d = b;
        d[static_cast<size_t>(it - b.begin()) + name.size() - 1] = 'a';
        probe.expect_rejected(d, "duplicate " + name);
        CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains(message.c_str()), GGUFError);
    }

    // general.alignment: 0, not a power of two, too big for the file, wrong type.
    REQUIRE(L.alignment_value != 0);
    for (uint32_t a : {0u, 3u, 48u, 96u, 0x80000000u, 0xffffffffu}) {
        std::vector<uint8_t> d = b;
        put_at<uint32_t>(d, L.alignment_value, a);
        probe.expect_rejected(d, "alignment " + std::to_string(a));
    }
    for (uint32_t a : {1u, 2u, 16u, 128u}) {  // powers of two: may or may not fit the layout
        std::vector<uint8_t> d = b;
        put_at<uint32_t>(d, L.alignment_value, a);
        probe.run(d, "alignment " + std::to_string(a));
    }
    std::vector<uint8_t> d = b;
    put_at<uint32_t>(d, L.alignment_value - 4, static_cast<uint32_t>(GGUFValueType::I32));
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("general.alignment has type i32, wanted u32"), GGUFError);
    put_at<uint32_t>(d, L.alignment_value, 0);
    put_at<uint32_t>(d, L.alignment_value - 4, static_cast<uint32_t>(GGUFValueType::U32));
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("general.alignment 0 is not a nonzero power of two"), GGUFError);

    // A tensor type we do not know.
    d = b;
    put_at<uint32_t>(d, L.tensors[0].type, 16);  // IQ2_XXS
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("tensor 't.a': unknown ggml type id 16"), GGUFError);
    // ne[0] not a multiple of the block.
    d = b;
    put_at<uint32_t>(d, L.tensors[0].type, static_cast<uint32_t>(GGMLType::Q8_0));
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("ne[0] = 3 is not a multiple of the Q8_0 block size 32"), GGUFError);
    // A zero dimension, an element count that overflows.
    d = b;
    put_at<uint64_t>(d, L.tensors[1].ne[1], 0);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("tensor 't.b': ne[1] is 0"), GGUFError);
    d = b;
    put_at<uint64_t>(d, L.tensors[1].ne[0], uint64_t{1} << 62);
    put_at<uint64_t>(d, L.tensors[1].ne[1], 4);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("overflows"), GGUFError);
    // 2^62 F32 elements fit in int64, their 2^64 bytes do not (found by the fuzzer).
    d = b;
    put_at<uint64_t>(d, L.tensors[0].ne[0], uint64_t{1} << 62);
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("tensor 't.a': the byte size overflows 64 bits"), GGUFError);
    // A nested array.
    d = b;
    put_at<uint32_t>(d, L.elem_types[0], static_cast<uint32_t>(GGUFValueType::ARRAY));
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("nested arrays are not supported"), GGUFError);
    // A bool that is neither 0 nor 1.
    d = b;
    d[L.bools[0]] = 2;
    CHECK_THROWS_WITH_AS(GGUFFile::parse(d), doctest::Contains("bool value is 2"), GGUFError);
    // A file with tensors whose data section would start past the end.
    CHECK_THROWS_AS(GGUFFile::parse(std::span<const uint8_t>(b).first(L.infos_end)), GGUFError);
    probe.report("targeted damage");
}
