// minfer inspect [FILE] [--json] [--array-elems N]
//
// Prints what a GGUF file holds: the header, the metadata (arrays summarised
// by their type, count and first few elements) and the tensor table with
// totals. --json prints the same as one JSON object, for scripts.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <string_view>

#include <boost/json.hpp>
#include <cxxopts.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/gguf/gguf.h"

namespace minfer::cli {

namespace {

namespace json = boost::json;

// Text strings are cut to this many bytes; JSON keeps scalar strings whole
// (a chat template is a few KB) but cuts array elements the same way.
constexpr size_t kMaxStringBytes = 120;
constexpr size_t kMaxElementBytes = 40;

// Length of the valid UTF-8 sequence starting at s[i], or 0 if there is none.
size_t utf8_sequence(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t min = 0;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) len = 2, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, min = 0x10000;
    else return 0;
    if (i + len > s.size()) return 0;
    uint32_t cp = c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
        const auto cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

// A string from the file as one quoted line: quotes, backslashes and control
// characters escaped, bytes that are not UTF-8 as \xNN, cut after max_bytes.
std::string quote(std::string_view s, size_t max_bytes) {
    std::string out = "\"";
    size_t i = 0;
    while (i < s.size() && i < max_bytes) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t len = utf8_sequence(s, i);
        if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20 || c == 0x7f || len == 0) out += fmt::format("\\x{:02x}", c);
        else out.append(s.substr(i, len));
        i += len == 0 ? 1 : len;
    }
    out += '"';
    if (i < s.size()) out += fmt::format("... ({} bytes)", s.size());
    return out;
}

// JSON text must be UTF-8: invalid bytes become U+FFFD.
std::string valid_utf8(std::string_view s, size_t max_bytes) {
    std::string out;
    size_t i = 0;
    while (i < s.size() && i < max_bytes) {
        const size_t len = utf8_sequence(s, i);
        if (len == 0) out += "\xef\xbf\xbd";
        else out.append(s.substr(i, len));
        i += len == 0 ? 1 : len;
    }
    if (i < s.size()) out += "...";
    return out;
}

// An f32 printed as the shortest decimal that reads back as the same float
// (1e-05, not 9.999999747378752e-06).
std::string float_text(GGUFValueType t, double d) {
    return t == GGUFValueType::F32 ? fmt::format("{}", static_cast<float>(d)) : fmt::format("{}", d);
}

json::value float_json(GGUFValueType t, double d) {
    if (!std::isfinite(d)) return json::value(fmt::format("{}", d));  // JSON has no nan/inf
    return json::value(std::stod(float_text(t, d)));
}

template <typename T>
T load(const GGUFArray& a, uint64_t i) {
    T v;
    std::memcpy(&v, a.raw.data() + i * sizeof(T), sizeof(T));
    return v;
}

// Element i of an array, as the scalar GGUFValue it would be on its own.
GGUFValue element(const GGUFArray& a, uint64_t i) {
    const GGUFValueType t = a.elem_type;
    switch (t) {
        case GGUFValueType::U8: return {t, uint64_t{load<uint8_t>(a, i)}};
        case GGUFValueType::U16: return {t, uint64_t{load<uint16_t>(a, i)}};
        case GGUFValueType::U32: return {t, uint64_t{load<uint32_t>(a, i)}};
        case GGUFValueType::U64: return {t, load<uint64_t>(a, i)};
        case GGUFValueType::I8: return {t, int64_t{load<int8_t>(a, i)}};
        case GGUFValueType::I16: return {t, int64_t{load<int16_t>(a, i)}};
        case GGUFValueType::I32: return {t, int64_t{load<int32_t>(a, i)}};
        case GGUFValueType::I64: return {t, load<int64_t>(a, i)};
        case GGUFValueType::F32: return {t, double{load<float>(a, i)}};
        case GGUFValueType::F64: return {t, load<double>(a, i)};
        case GGUFValueType::BOOL: return {t, load<uint8_t>(a, i) != 0};
        case GGUFValueType::STRING: return {t, a.strings[i]};
        case GGUFValueType::ARRAY: break;  // the reader rejects nested arrays
    }
    return {GGUFValueType::STRING, std::string("?")};
}

// "u32", or "string[512]" for an array.
std::string type_text(const GGUFValue& v) {
    if (v.type != GGUFValueType::ARRAY) return gguf_value_type_name(v.type);
    const GGUFArray& a = std::get<GGUFArray>(v.v);
    return fmt::format("{}[{}]", gguf_value_type_name(a.elem_type), a.count);
}

std::string scalar_text(const GGUFValue& v, size_t max_bytes) {
    if (const auto* u = std::get_if<uint64_t>(&v.v)) return fmt::format("{}", *u);
    if (const auto* i = std::get_if<int64_t>(&v.v)) return fmt::format("{}", *i);
    if (const auto* d = std::get_if<double>(&v.v)) return float_text(v.type, *d);
    if (const auto* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
    if (const auto* s = std::get_if<std::string>(&v.v)) return quote(*s, max_bytes);
    return "?";
}

json::value scalar_json(const GGUFValue& v, size_t max_bytes) {
    if (const auto* u = std::get_if<uint64_t>(&v.v)) return json::value(*u);
    if (const auto* i = std::get_if<int64_t>(&v.v)) return json::value(*i);
    if (const auto* d = std::get_if<double>(&v.v)) return float_json(v.type, *d);
    if (const auto* b = std::get_if<bool>(&v.v)) return json::value(*b);
    if (const auto* s = std::get_if<std::string>(&v.v)) return json::value(valid_utf8(*s, max_bytes));
    return nullptr;
}

// A value on one line; arrays show their first `elems` elements.
std::string value_text(const GGUFValue& v, size_t elems) {
    if (v.type != GGUFValueType::ARRAY) return scalar_text(v, kMaxStringBytes);
    const GGUFArray& a = std::get<GGUFArray>(v.v);
    std::string out = "[";
    for (uint64_t i = 0; i < a.count && i < elems; ++i) {
        if (i > 0) out += ", ";
        out += scalar_text(element(a, i), kMaxElementBytes);
    }
    if (a.count > elems) out += a.count > 0 && elems > 0 ? ", ..." : "...";
    return out + "]";
}

json::object metadata_json(const std::string& key, const GGUFValue& v, size_t elems) {
    json::object o;
    o["key"] = valid_utf8(key, std::string::npos);
    o["type"] = gguf_value_type_name(v.type);
    if (v.type != GGUFValueType::ARRAY) {
        o["value"] = scalar_json(v, std::string::npos);
        return o;
    }
    const GGUFArray& a = std::get<GGUFArray>(v.v);
    o["elem_type"] = gguf_value_type_name(a.elem_type);
    o["count"] = a.count;
    json::array head;
    for (uint64_t i = 0; i < a.count && i < elems; ++i) head.push_back(scalar_json(element(a, i), kMaxElementBytes));
    o["head"] = std::move(head);
    return o;
}

std::string shape_text(const std::vector<int64_t>& ne) { return fmt::format("[{}]", fmt::join(ne, ", ")); }

// 1054368 -> "1.0 MiB"
std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = static_cast<double>(n);
    size_t u = 0;
    while (x >= 1024 && u + 1 < std::size(units)) x /= 1024, ++u;
    return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", x, units[u]);
}

struct TypeTotal {
    uint64_t tensors = 0;
    uint64_t params = 0;
    uint64_t bytes = 0;
};

// Totals by tensor type name (sorted by name), and over all tensors.
std::map<std::string, TypeTotal> totals_by_type(const GGUFFile& f, TypeTotal& all) {
    std::map<std::string, TypeTotal> by_type;
    for (const GGUFTensorInfo& t : f.tensors()) {
        TypeTotal& tt = by_type[ggml_type_name(t.type)];
        for (TypeTotal* x : {&tt, &all}) {
            x->tensors += 1;
            x->params += static_cast<uint64_t>(t.n_elements());
            x->bytes += t.nbytes;
        }
    }
    return by_type;
}

void print_text(const GGUFFile& f, size_t elems) {
    std::string out;
    out += fmt::format("file       {}\n", f.path());
    out += fmt::format("size       {} bytes ({})\n", f.file_size(), human_bytes(f.file_size()));
    out += fmt::format("version    {}\n", f.version());
    out += fmt::format("alignment  {}\n", f.alignment());
    out += fmt::format("metadata   {} keys\n", f.metadata().size());
    out += fmt::format("tensors    {}\n", f.tensors().size());
    if (!f.tensors().empty()) out += fmt::format("data       from offset {}\n", f.data_offset());

    size_t key_w = 0, type_w = 0;
    for (const auto& [key, v] : f.metadata()) {
        key_w = std::max(key_w, quote(key, kMaxStringBytes).size() - 2);
        type_w = std::max(type_w, type_text(v).size());
    }
    out += fmt::format("\nmetadata ({} keys):\n", f.metadata().size());
    for (const auto& [key, v] : f.metadata()) {
        const std::string k = quote(key, kMaxStringBytes);
        out += fmt::format("  {:<{}}  {:<{}} = {}\n", k.substr(1, k.size() - 2), key_w, type_text(v), type_w,
                           value_text(v, elems));
    }

    if (!f.tensors().empty()) {
        size_t name_w = 4, shape_w = 5;
        for (const GGUFTensorInfo& t : f.tensors()) {
            name_w = std::max(name_w, quote(t.name, kMaxStringBytes).size() - 2);
            shape_w = std::max(shape_w, shape_text(t.ne).size());
        }
        out += fmt::format("\ntensors ({}; offsets from the data section at {}):\n", f.tensors().size(), f.data_offset());
        out += fmt::format("  {:>4}  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", "#", "name", name_w, "type", "shape",
                           shape_w, "bytes", "offset");
        for (size_t i = 0; i < f.tensors().size(); ++i) {
            const GGUFTensorInfo& t = f.tensors()[i];
            const std::string n = quote(t.name, kMaxStringBytes);
            out += fmt::format("  {:>4}  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", i, n.substr(1, n.size() - 2), name_w,
                               ggml_type_name(t.type), shape_text(t.ne), shape_w, t.nbytes, t.offset);
        }
    }

    TypeTotal all;
    const auto by_type = totals_by_type(f, all);
    out += fmt::format("\ntotals: {} tensors, {} parameters, {} bytes ({})\n", all.tensors, all.params, all.bytes,
                       human_bytes(all.bytes));
    for (const auto& [name, t] : by_type)
        out += fmt::format("  {:<5}  {:>5} tensors  {:>14} parameters  {:>14} bytes ({})\n", name, t.tensors, t.params,
                           t.bytes, human_bytes(t.bytes));
    if (const ExpertWeights x = expert_weights(f); x.n_experts > 0) {
        const double idle = 1.0 - double(x.n_experts_used) / x.n_experts;
        out += fmt::format("experts: {} a layer, {} active a token; {} parameters ({}) in experts; "
                           "active a token: {:.0f} parameters ({})\n",
                           x.n_experts, x.n_experts_used, x.params, human_bytes(x.bytes),
                           double(all.params) - idle * double(x.params),
                           human_bytes(uint64_t(double(all.bytes) - idle * double(x.bytes))));
    }
    std::fputs(out.c_str(), stdout);
}

void print_json(const GGUFFile& f, size_t elems) {
    json::object o;
    o["file"] = valid_utf8(f.path(), std::string::npos);
    o["file_size"] = f.file_size();
    o["version"] = f.version();
    o["alignment"] = f.alignment();
    o["kv_count"] = f.metadata().size();
    o["tensor_count"] = f.tensors().size();
    o["data_offset"] = f.data_offset();

    json::array metadata;
    for (const auto& [key, v] : f.metadata()) metadata.push_back(metadata_json(key, v, elems));
    o["metadata"] = std::move(metadata);

    json::array tensors;
    for (const GGUFTensorInfo& t : f.tensors()) {
        json::object jt;
        jt["name"] = valid_utf8(t.name, std::string::npos);
        jt["type"] = ggml_type_name(t.type);
        json::array shape;
        for (int64_t d : t.ne) shape.push_back(d);
        jt["shape"] = std::move(shape);
        jt["bytes"] = t.nbytes;
        jt["offset"] = t.offset;
        tensors.push_back(std::move(jt));
    }
    o["tensors"] = std::move(tensors);

    TypeTotal all;
    const auto by_type = totals_by_type(f, all);
    json::object types;
    for (const auto& [name, t] : by_type)
        types[name] = {{"tensors", t.tensors}, {"parameters", t.params}, {"bytes", t.bytes}};
    o["totals"] = {{"tensors", all.tensors}, {"parameters", all.params}, {"bytes", all.bytes}, {"by_type", std::move(types)}};
    if (const ExpertWeights x = expert_weights(f); x.n_experts > 0)
        o["experts"] = {
            {"count", x.n_experts}, {"used", x.n_experts_used}, {"parameters", x.params}, {"bytes", x.bytes}};

    std::printf("%s\n", json::serialize(o).c_str());
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
    cxxopts::Options opts = command_options("inspect",
                                            "Print a GGUF file's header, metadata and tensor table.\n"
                                            "FILE defaults to the bundled model.",
                                            "[FILE] [options]");
    add_model_file_option(opts, "file", "GGUF file");
    // clang-format off
    opts.add_options()
        ("json", "print one JSON object instead of text")
        ("array-elems", "array elements to show", cxxopts::value<size_t>()->default_value("5"));
    // clang-format on
    add_synthetic_option(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"file"});

    const GGUFFile file = open_model_arg(args, "file");
    const size_t elems = args["array-elems"].as<size_t>();
    if (args.count("json"))
        print_json(file, elems);
    else
        print_text(file, elems);
    return 0;
}

}  // namespace minfer::cli
