// GGUF reader on malformed input: versions and headers, error messages, and a
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
#include "gguf_test_util.h"

using namespace minfer;
using namespace minfer::gguf_test;

namespace {

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
    auto with_value = [&]<typename T>(size_t at, T v, bool must_reject) {
        const T old = get_at<T>(b, at);
        put_at(b, at, v);
        const std::string what = "u" + std::to_string(8 * sizeof(T)) + " at " + std::to_string(at) + " = " +
                                 std::to_string(v);
        must_reject ? probe.expect_rejected(all, what) : (void)probe.run(all, what);
        put_at(b, at, old);
    };
    auto with_u64 = [&](size_t at, uint64_t v, bool must_reject) { with_value(at, v, must_reject); };
    auto with_u32 = [&](size_t at, uint32_t v, bool must_reject) { with_value(at, v, must_reject); };
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
