#include "book/site/trim.h"
#include "book/site/http_util.h"

#include <boost/json.hpp>

#include <cstdio>
#include <cstdlib>

// Header-only xxHash, as kvcache/block_manager.cpp uses it (GCC 12's warnings
// about its AVX-512 path are false positives inside GCC's own intrinsics).
#define XXH_INLINE_ALL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xxhash.h>
#pragma GCC diagnostic pop

namespace minfer::book {

namespace {


// Splits on `sep` outside double quotes (ETags may hold commas).
std::vector<std::string_view> split_list(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    bool quoted = false;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '"') quoted = !quoted;
        if (s[i] == sep && !quoted) {
            out.push_back(trim(s.substr(start, i - start)));
            start = i + 1;
        }
    }
    out.push_back(trim(s.substr(start)));
    return out;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\0') return std::nullopt;
        if (text[i] != '%') {
            out.push_back(text[i]);
            continue;
        }
        if (i + 2 >= text.size()) return std::nullopt;
        const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return std::nullopt;
        out.push_back(char(hi * 16 + lo));
        i += 2;
    }
    return out;
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return out;
}

std::string_view target_path(std::string_view target) {
    return target.substr(0, target.find('?'));
}

std::optional<std::vector<std::string>> decode_segments(std::string_view path) {
    if (!path.empty() && path.front() == '/') path.remove_prefix(1);
    // Split first: an encoded slash (%2F) stays inside its segment.
    std::vector<std::string> segments;
    while (true) {
        const size_t slash = path.find('/');
        std::optional<std::string> segment = percent_decode(path.substr(0, slash));
        if (!segment) return std::nullopt;
        segments.push_back(std::move(*segment));
        if (slash == std::string_view::npos) return segments;
        path.remove_prefix(slash + 1);
    }
}

bool accepts(const HttpRequest& request, std::string_view media_type) {
    auto it = request.find(http::field::accept);
    if (it == request.end() || trim(it->value()).empty()) return true;
    const std::string wanted = ascii_lower(media_type);
    const std::string wanted_type = wanted.substr(0, wanted.find('/'));
    // The most specific matching range decides (RFC 9110 12.5.1):
    // "*/*, application/json;q=0" refuses JSON.
    int best_specificity = 0;
    double best_q = 0;
    for (std::string_view item : split_list(it->value(), ',')) {
        std::vector<std::string_view> parts = split_list(item, ';');
        const std::string range = ascii_lower(parts[0]);
        double q = 1;
        for (size_t i = 1; i < parts.size(); ++i) {
            std::string param = ascii_lower(parts[i]);
            if (param.rfind("q=", 0) == 0) q = std::strtod(param.c_str() + 2, nullptr);
        }
        int specificity = range == wanted ? 3 : range == wanted_type + "/*" ? 2 : range == "*/*" ? 1 : 0;
        if (specificity > best_specificity) {
            best_specificity = specificity;
            best_q = q;
        }
    }
    return best_specificity > 0 && best_q > 0;
}

bool none_match_hits(std::string_view if_none_match, std::string_view etag) {
    auto opaque = [](std::string_view tag) {
        if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
        return tag;
    };
    for (std::string_view tag : split_list(if_none_match, ','))
        if (tag == "*" || opaque(tag) == opaque(etag)) return true;
    return false;
}

std::string strong_etag(std::string_view body) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "\"%016llx\"", static_cast<unsigned long long>(XXH3_64bits(body.data(), body.size())));
    return hex;
}

HttpResponse no_store_json(const HttpRequest& request, http::status status, const boost::json::object& body,
                           std::string_view content_type) {
    HttpResponse res{status, request.version()};
    res.set(http::field::content_type, content_type);
    res.set(http::field::cache_control, "no-store");
    res.body() = boost::json::serialize(body);
    res.prepare_payload();
    return res;
}

}  // namespace minfer::book
