// The small pieces of HTTP the book's API reads from a request: the path,
// percent-decoded segments, Accept, If-None-Match, and the strong ETag it
// sends back.
#pragma once

#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_server.h"

namespace minfer::book {

// The target without its query string: "/api/v1/chapters?x=1" -> "/api/v1/chapters".
std::string_view target_path(std::string_view target);

// Decodes %XX escapes; nullopt for a malformed escape or a NUL (encoded or not).
std::optional<std::string> percent_decode(std::string_view text);

// The path's segments after the leading '/', each percent-decoded; nullopt
// when an escape is malformed ("%", "%4", "%zz"). "/a/b%2Fc" -> {"a", "b/c"}.
std::optional<std::vector<std::string>> decode_segments(std::string_view path);

// Whether the Accept header admits `media_type` ("application/json"): true
// when the header is absent or a range with q > 0 covers the type
// (type/subtype, type/*, */*).
bool accepts(const HttpRequest& request, std::string_view media_type);

// Whether an If-None-Match value names `etag` (weak comparison, RFC 9110
// 13.1.2: W/ is ignored) or is "*".
bool none_match_hits(std::string_view if_none_match, std::string_view etag);

// `s` with A-Z lowered (header names, media types, hosts; UTF-8 passes unchanged).
std::string ascii_lower(std::string_view s);

// A JSON answer that no cache may keep (MCP's, Ask AI's and problem details:
// each is for one request).
HttpResponse no_store_json(const HttpRequest& request, http::status status, const boost::json::object& body,
                           std::string_view content_type = "application/json");

// A strong ETag for `body`: a quoted 64-bit xxh3 hash in hex.
std::string strong_etag(std::string_view body);

}  // namespace minfer::book
