#include "book/site/problem.h"

#include <boost/json.hpp>

#include "book/site/http_util.h"

namespace minfer::book {

namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The request's path as a URI reference (RFC 3986), which "instance" must be:
// a '%' that starts no escape, and any byte outside the URI characters, are
// escaped themselves ("/x/%zz" -> "/x/%25zz").
std::string uri_reference(std::string_view path) {
    static constexpr std::string_view kAllowed = "-._~:/?#[]@!$&'()*+,;=";
    std::string out;
    for (size_t i = 0; i < path.size(); ++i) {
        const char c = path[i];
        const bool escape = c == '%' && i + 2 < path.size() && is_hex(path[i + 1]) && is_hex(path[i + 2]);
        if (is_alnum(c) || kAllowed.find(c) != std::string_view::npos || escape) {
            out += c;
        } else {
            static constexpr char kHex[] = "0123456789ABCDEF";
            const unsigned char byte = static_cast<unsigned char>(c);
            out += '%';
            out += kHex[byte >> 4];
            out += kHex[byte & 15];
        }
    }
    return out;
}

}  // namespace

HttpResponse problem(const HttpRequest& request, http::status status, const std::string& detail) {
    boost::json::object body{
        {"type", "about:blank"},
        {"title", std::string(http::obsolete_reason(status))},
        {"status", static_cast<int>(status)},
        {"detail", detail},
        {"instance", uri_reference(target_path(request.target()))},
    };
    return no_store_json(request, status, body, "application/problem+json");
}

}  // namespace minfer::book
