#include "book/site/api.h"

#include <boost/json.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "book/site/api_json.h"
#include "book/site/http_util.h"
#include "book/site/mcp.h"
#include "book/site/problem.h"

namespace minfer::book {

namespace json = boost::json;

namespace {

// The book does not change while the server runs; five minutes keeps edits
// visible soon after a restart, and the ETag makes a revalidation cheap.
constexpr const char* kCacheControl = "public, max-age=300";

// A JSON document served with GET and HEAD, its strong ETag computed once.
struct Resource {
    std::string body, etag;
    explicit Resource(std::string b) : body(std::move(b)), etag(strong_etag(body)) {}
};

std::string read_openapi(const Book& book) {
    const auto file = book.root / "book" / "site" / "openapi.json";
    std::ifstream in(file, std::ios::binary);
    if (!in) throw BookError("book api: cannot read " + file.string());
    std::ostringstream text;
    text << in.rdbuf();
    boost::system::error_code ec;
    json::parse(text.str(), ec);
    if (ec) throw BookError("book api: " + file.string() + " is not valid JSON: " + ec.message());
    return text.str();
}

// GET or HEAD of a resource: 405 for other methods, 406 when Accept excludes
// JSON, 304 when If-None-Match names the current ETag, else 200.
HttpResponse serve(const HttpRequest& req, const Resource& r) {
    const bool head = req.method() == http::verb::head;
    if (req.method() != http::verb::get && !head) {
        HttpResponse res = problem(req, http::status::method_not_allowed,
                                   std::string(req.method_string()) + " is not allowed here; use GET or HEAD");
        res.set(http::field::allow, "GET, HEAD");
        return res;
    }
    if (!accepts(req, "application/json"))
        return problem(req, http::status::not_acceptable, "this resource is application/json; Accept excludes it");
    auto if_none_match = req.find(http::field::if_none_match);
    const bool not_modified = if_none_match != req.end() && none_match_hits(if_none_match->value(), r.etag);
    HttpResponse res{not_modified ? http::status::not_modified : http::status::ok, req.version()};
    res.set(http::field::etag, r.etag);
    res.set(http::field::cache_control, kCacheControl);
    if (not_modified) return res;
    res.set(http::field::content_type, "application/json");
    if (head) {
        res.content_length(r.body.size());  // what GET would send, without the body
    } else {
        res.body() = r.body;
        res.prepare_payload();
    }
    return res;
}

// A HEAD request gets a GET's status and headers without the body, for
// errors too: a body after HEAD would read as the start of the next answer.
HttpResponse without_body_for_head(const HttpRequest& req, HttpResponse res) {
    if (req.method() == http::verb::head) res.body().clear();
    return res;
}

}  // namespace

struct BookApi::Impl {
    Impl(const Book& book, const ApiOptions& options)
        : limiter(options.requests_per_minute, options.burst, options.clock),
          mcp(book),
          listing(json::serialize(chapters_json(book))),
          openapi(read_openapi(book)) {
        for (const Chapter& c : book.chapters) chapters.emplace(c.slug, json::serialize(chapter_json(c, true)));
    }

    HttpResponse route(const HttpRequest& req, std::string_view path) const {
        std::optional<std::vector<std::string>> segments = decode_segments(path);
        if (!segments) return problem(req, http::status::bad_request, "the path has a malformed percent-escape");
        const std::vector<std::string>& s = *segments;  // s[0] is "api"
        if (s.size() == 2 && s[1] == "mcp") return mcp.handle(req);
        if (s.size() == 3 && s[1] == "v1" && s[2] == "chapters") return serve(req, listing);
        if (s.size() == 4 && s[1] == "v1" && s[2] == "chapters") {
            auto it = chapters.find(s[3]);
            if (it == chapters.end())
                return problem(req, http::status::not_found,
                               "no chapter has the slug \"" + s[3] + "\"; GET /api/v1/chapters lists them");
            return serve(req, it->second);
        }
        return problem(req, http::status::not_found,
                       "no API resource at " + std::string(path) + "; /openapi.json describes the API");
    }

    HttpResponse too_many(const HttpRequest& req, const RateLimiter::Decision& d) const {
        HttpResponse res = problem(req, http::status::too_many_requests,
                                   "this address has used its requests for now (RateLimit-Policy says how many); "
                                   "retry after " + std::to_string(d.retry_after_s) + " s");
        res.set(http::field::retry_after, std::to_string(d.retry_after_s));
        return res;
    }

    RateLimiter limiter;
    McpServer mcp;
    Resource listing, openapi;
    std::map<std::string, Resource, std::less<>> chapters;
};

BookApi::BookApi(const Book& book, ApiOptions options) : impl_(std::make_unique<Impl>(book, options)) {}
BookApi::~BookApi() = default;

namespace {

// The keyless JSON API may be read from any page (CORS): no credentials, GET
// and HEAD only, and its rate-limit and cache headers visible to scripts. The
// MCP endpoint is not opened this way: it checks Origin against DNS rebinding.
void allow_any_origin(HttpResponse& res) {
    res.set(http::field::access_control_allow_origin, "*");
    res.set(http::field::access_control_expose_headers, "ETag, RateLimit, RateLimit-Policy, Retry-After");
}

// A browser's preflight before a cross-origin GET with headers of its own (If-None-Match).
HttpResponse preflight(const HttpRequest& req) {
    HttpResponse res{http::status::no_content, req.version()};
    allow_any_origin(res);
    res.set(http::field::access_control_allow_methods, "GET, HEAD");
    res.set(http::field::access_control_allow_headers, "If-None-Match, Accept");
    res.set(http::field::access_control_max_age, "86400");
    res.prepare_payload();
    return res;
}

}  // namespace

std::optional<HttpResponse> BookApi::handle(const HttpRequest& request, const std::string& client_address) {
    const std::string_view path = target_path(request.target());
    const bool keyless = path == "/openapi.json" || path == "/api/v1" || path.starts_with("/api/v1/");
    if (keyless && request.method() == http::verb::options) return preflight(request);
    if (path == "/openapi.json") {
        HttpResponse res = serve(request, impl_->openapi);
        allow_any_origin(res);
        return without_body_for_head(request, std::move(res));
    }
    if (path != "/api" && !path.starts_with("/api/")) return std::nullopt;

    // Every /api request counts, whatever it asks for, so probing unknown
    // paths or sending bad MCP messages costs the same as reading chapters.
    const RateLimiter::Decision d = impl_->limiter.take(client_address);
    HttpResponse res = d.allowed ? impl_->route(request, path) : impl_->too_many(request, d);
    res.set("RateLimit-Policy", impl_->limiter.policy_field());
    res.set("RateLimit", RateLimiter::state_field(d));
    if (keyless) allow_any_origin(res);
    return without_body_for_head(request, std::move(res));
}

}  // namespace minfer::book
