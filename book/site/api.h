// The book's machine-readable surfaces under /api and /openapi.json: the
// versioned JSON API (/api/v1/chapters, /api/v1/chapters/{slug}), its OpenAPI
// 3.1 document, and the MCP server at /api/mcp. Errors are RFC 9457
// problem+json (JSON-RPC errors on /api/mcp); every /api request is counted
// against a token bucket per client address.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "book/site/book_index.h"
#include "book/site/rate_limit.h"
#include "server/http/http_server.h"

namespace minfer::book {

struct ApiOptions {
    double requests_per_minute = 60;  // the bucket's refill rate (--rate-limit)
    double burst = 30;                // the bucket's size (--rate-burst)
    RateLimiter::Clock clock;         // monotonic; empty: std::chrono::steady_clock
};

class BookApi {
public:
    // `book` must outlive the API. Reads ROOT/book/site/openapi.json (throws
    // BookError when it is missing or not JSON); throws std::invalid_argument
    // for a rate below 0 or a burst below 1.
    BookApi(const Book& book, ApiOptions options);
    ~BookApi();

    // The answer to a request for /api/... or /openapi.json; nullopt for any
    // other path (the site answers those). client_address: the peer's IP.
    std::optional<HttpResponse> handle(const HttpRequest& request, const std::string& client_address);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace minfer::book
