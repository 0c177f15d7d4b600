// The book's /api and /openapi.json through BookApi::handle, with requests
// built by hand: every status path of the JSON API, ETag revalidation, the
// token bucket on a clock the test moves, and the MCP server's JSON-RPC.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "book/site/api.h"
#include "book/site/http_util.h"
#include "book/site/rate_limit.h"

using namespace minfer;
using namespace minfer::book;
namespace json = boost::json;
using std::chrono::seconds;

namespace {

// A small book in memory; root is the repository, for book/site/openapi.json.
Book test_book() {
    Book b;
    b.root = MINFER_SOURCE_DIR;
    b.title = "Test book";
    b.chapters.push_back(Chapter{0, "introduction", "Introduction", "Why kernels.", "A longer description.",
                                 "# Introduction\n\nThe overview.\n",
                                 {Section{"why", "Why", "One line.", true, "# Why\n"},
                                  Section{"later", "Later", "Another line.", false, "# Later\n"}}});
    b.chapters.push_back(Chapter{1, "foundations", "Foundations", "The model.", "Threads and warps.",
                                 "# Foundations\n", {Section{"warps", "Warps", "Warps.", true, "# Warps\n"}}});
    b.glossary = {
        {"kv-cache", "KV cache", "The keys and values kept for every token.", {"paged-attention"}},
        {"paged-attention", "Paged attention", "Attention over a KV cache split into fixed blocks.", {}},
        {"warp", "Warp", "32 threads that execute one instruction together.", {}},
    };
    return b;
}

// A monotonic clock the test moves by hand.
struct ManualClock {
    RateLimiter::TimePoint now{};
    RateLimiter::Clock fn() {
        return [this] { return now; };
    }
};

HttpRequest request(http::verb verb, const std::string& target) {
    HttpRequest r{verb, target, 11};
    r.set(http::field::host, "localhost:8000");
    return r;
}

HttpResponse call(BookApi& api, const HttpRequest& r, const std::string& client = "10.0.0.1") {
    std::optional<HttpResponse> res = api.handle(r, client);
    REQUIRE(res.has_value());
    return *res;
}

json::object body_of(const HttpResponse& res) { return json::parse(res.body()).as_object(); }

std::string header(const HttpResponse& res, std::string_view name) { return std::string(res[name]); }

void check_problem(const HttpResponse& res, http::status status, const std::string& path) {
    CHECK(res.result() == status);
    CHECK(header(res, "Content-Type") == "application/problem+json");
    json::object p = body_of(res);
    CHECK(p.at("type") == "about:blank");
    CHECK(p.at("title").as_string() == std::string(http::obsolete_reason(status)));
    CHECK(p.at("status") == static_cast<int>(status));
    CHECK(p.at("detail").as_string().size() > 0);
    CHECK(p.at("instance").as_string() == path);
}

}  // namespace

TEST_CASE("book api: /api/v1/chapters lists every chapter with its sections and their URLs") {
    Book book = test_book();
    BookApi api(book, {});
    HttpResponse res = call(api, request(http::verb::get, "/api/v1/chapters"));
    CHECK(res.result() == http::status::ok);
    CHECK(header(res, "Content-Type") == "application/json");
    CHECK(header(res, "Cache-Control") == "public, max-age=300");
    CHECK(header(res, "ETag").size() == 18);  // a quoted 16-digit hex hash
    json::object body = body_of(res);
    CHECK(body.at("version") == "v1");
    const json::array& chapters = body.at("chapters").as_array();
    REQUIRE(chapters.size() == book.chapters.size());
    for (size_t i = 0; i < chapters.size(); ++i) {
        const Chapter& c = book.chapters[i];
        const json::object& o = chapters[i].as_object();
        CHECK(o.at("number") == c.number);
        CHECK(o.at("slug").as_string() == c.slug);
        CHECK(o.at("title").as_string() == c.title);
        CHECK(o.at("summary").as_string() == c.summary);
        CHECK(o.at("description").as_string() == c.description);
        CHECK(o.at("url").as_string() == "/chapters/" + c.slug);
        CHECK(o.at("markdown_url").as_string() == "/chapters/" + c.slug + ".md");
        CHECK_FALSE(o.contains("markdown"));  // the listing stays small
        const json::array& sections = o.at("sections").as_array();
        REQUIRE(sections.size() == c.sections.size());
        for (size_t j = 0; j < sections.size(); ++j) {
            const Section& s = c.sections[j];
            const json::object& so = sections[j].as_object();
            CHECK(so.at("slug").as_string() == s.slug);
            CHECK(so.at("title").as_string() == s.title);
            CHECK(so.at("summary").as_string() == s.summary);
            CHECK(so.at("status") == (s.written ? "written" : "in-preparation"));
            CHECK(so.at("url").as_string() == "/chapters/" + c.slug + "/" + s.slug);
            CHECK(so.at("markdown_url").as_string() == "/chapters/" + c.slug + "/" + s.slug + ".md");
        }
    }
}

TEST_CASE("book api: one chapter with its overview's Markdown - an unknown slug is a 404 problem") {
    Book book = test_book();
    BookApi api(book, {});
    HttpResponse res = call(api, request(http::verb::get, "/api/v1/chapters/foundations?fields=ignored"));
    CHECK(res.result() == http::status::ok);
    json::object o = body_of(res);
    CHECK(o.at("slug") == "foundations");
    CHECK(o.at("markdown").as_string() == book.chapters[1].markdown);
    CHECK(o.at("sections").as_array().size() == 1);

    check_problem(call(api, request(http::verb::get, "/api/v1/chapters/nope")), http::status::not_found,
                  "/api/v1/chapters/nope");
    check_problem(call(api, request(http::verb::get, "/api/v2/chapters")), http::status::not_found,
                  "/api/v2/chapters");
    check_problem(call(api, request(http::verb::get, "/api")), http::status::not_found, "/api");
    check_problem(call(api, request(http::verb::get, "/api/v1/chapters/foundations/warps")),
                  http::status::not_found, "/api/v1/chapters/foundations/warps");
}

TEST_CASE("book api: percent-escapes decode - a malformed one is a 400 problem") {
    Book book = test_book();
    BookApi api(book, {});
    CHECK(call(api, request(http::verb::get, "/api/v1/chapters/found%61tions")).result() == http::status::ok);
    // "instance" stays a URI reference: the stray '%' is escaped.
    check_problem(call(api, request(http::verb::get, "/api/v1/chapters/%zz")), http::status::bad_request,
                  "/api/v1/chapters/%25zz");
    check_problem(call(api, request(http::verb::get, "/api/v1/chapters/a%4")), http::status::bad_request,
                  "/api/v1/chapters/a%254");
    check_problem(call(api, request(http::verb::get, "/api/v1/chapters/%")), http::status::bad_request,
                  "/api/v1/chapters/%25");
    check_problem(call(api, request(http::verb::get, "/api/v1/chapters/caf\xc3\xa9")), http::status::not_found,
                  "/api/v1/chapters/caf%C3%A9");
    // An escaped slash stays inside the segment: no chapter has that slug.
    CHECK(call(api, request(http::verb::get, "/api/v1/chapters/intro%2Fduction")).result() == http::status::not_found);
}

TEST_CASE("book api: paths outside /api and /openapi.json are the site's") {
    Book book = test_book();
    BookApi api(book, {});
    for (std::string path : {"/", "/chapters/foundations", "/apix", "/openapi.yaml", "/llms.txt"})
        CHECK_FALSE(api.handle(request(http::verb::get, path), "10.0.0.1").has_value());
}

TEST_CASE("book api: HEAD has GET's headers and length, without the body") {
    Book book = test_book();
    BookApi api(book, {});
    HttpResponse get = call(api, request(http::verb::get, "/api/v1/chapters/introduction"));
    HttpResponse head = call(api, request(http::verb::head, "/api/v1/chapters/introduction"));
    CHECK(head.result() == http::status::ok);
    CHECK(head.body().empty());
    CHECK(header(head, "Content-Length") == std::to_string(get.body().size()));
    CHECK(header(head, "ETag") == header(get, "ETag"));
    CHECK(header(head, "Content-Type") == "application/json");

    // Errors too: a body after HEAD would corrupt the connection's next answer.
    HttpResponse missing = call(api, request(http::verb::head, "/api/v1/chapters/nope"));
    CHECK(missing.result() == http::status::not_found);
    CHECK(missing.body().empty());
    CHECK(call(api, request(http::verb::head, "/api/mcp")).body().empty());
}

TEST_CASE("book api: If-None-Match with the ETag (exact, weak, in a list, *) gives 304 without a body") {
    Book book = test_book();
    BookApi api(book, {});
    const std::string etag = header(call(api, request(http::verb::get, "/api/v1/chapters")), "ETag");
    const std::string other = header(call(api, request(http::verb::get, "/api/v1/chapters/foundations")), "ETag");
    CHECK(etag != other);
    for (std::string value : {etag, "W/" + etag, "\"0000000000000000\", " + etag, std::string("*")}) {
        HttpRequest r = request(http::verb::get, "/api/v1/chapters");
        r.set(http::field::if_none_match, value);
        HttpResponse res = call(api, r);
        CHECK(res.result() == http::status::not_modified);
        CHECK(res.body().empty());
        CHECK(header(res, "ETag") == etag);
        CHECK(header(res, "Cache-Control") == "public, max-age=300");
        CHECK_FALSE(header(res, "RateLimit").empty());
    }
    for (std::string value : {other, std::string("\"0000000000000000\"")}) {
        HttpRequest r = request(http::verb::get, "/api/v1/chapters");
        r.set(http::field::if_none_match, value);
        CHECK(call(api, r).result() == http::status::ok);
    }
}

TEST_CASE("book api: other methods are 405 with Allow - an Accept without JSON is 406") {
    Book book = test_book();
    BookApi api(book, {});
    for (http::verb v : {http::verb::post, http::verb::put, http::verb::delete_}) {
        HttpResponse res = call(api, request(v, "/api/v1/chapters/introduction"));
        check_problem(res, http::status::method_not_allowed, "/api/v1/chapters/introduction");
        CHECK(header(res, "Allow") == "GET, HEAD");
    }
    auto with_accept = [&](const std::string& accept) {
        HttpRequest r = request(http::verb::get, "/api/v1/chapters");
        r.set(http::field::accept, accept);
        return call(api, r);
    };
    check_problem(with_accept("text/html"), http::status::not_acceptable, "/api/v1/chapters");
    check_problem(with_accept("*/*, application/json;q=0"), http::status::not_acceptable, "/api/v1/chapters");
    for (std::string ok : {"application/json", "*/*", "application/*", "text/html, application/json;q=0.5"})
        CHECK(with_accept(ok).result() == http::status::ok);
}

TEST_CASE("book api: /openapi.json is the OpenAPI 3.1 document, with an ETag and outside the rate limit") {
    Book book = test_book();
    BookApi api(book, {.requests_per_minute = 60, .burst = 1});
    for (int i = 0; i < 3; ++i) {
        HttpResponse res = call(api, request(http::verb::get, "/openapi.json"));
        CHECK(res.result() == http::status::ok);
        CHECK(header(res, "RateLimit").empty());
        json::object doc = body_of(res);
        CHECK(doc.at("openapi").as_string().starts_with("3.1"));
        CHECK(doc.at("paths").as_object().contains("/api/v1/chapters/{slug}"));
        CHECK(doc.at("paths").as_object().contains("/api/mcp"));
    }
}

TEST_CASE("book api: a token bucket per address: the burst, then 429 with Retry-After, then refill") {
    Book book = test_book();
    ManualClock clock;
    BookApi api(book, {.requests_per_minute = 60, .burst = 3, .clock = clock.fn()});
    const HttpRequest r = request(http::verb::get, "/api/v1/chapters");
    for (int i = 0; i < 3; ++i) {
        HttpResponse res = call(api, r);
        CHECK(res.result() == http::status::ok);
        CHECK(header(res, "RateLimit-Policy") == "\"burst\";q=3;w=3");
        CHECK(header(res, "RateLimit") == "\"burst\";r=" + std::to_string(2 - i) + ";t=" + std::to_string(i + 1));
    }
    HttpResponse refused = call(api, r);
    check_problem(refused, http::status::too_many_requests, "/api/v1/chapters");
    CHECK(header(refused, "Retry-After") == "1");
    CHECK(header(refused, "RateLimit") == "\"burst\";r=0;t=3");
    // Unknown paths and MCP messages count too.
    CHECK(call(api, request(http::verb::get, "/api/nothing")).result() == http::status::too_many_requests);
    CHECK(call(api, request(http::verb::post, "/api/mcp")).result() == http::status::too_many_requests);
    // Another address has its own bucket.
    CHECK(call(api, r, "10.0.0.2").result() == http::status::ok);

    clock.now += std::chrono::milliseconds(999);
    CHECK(call(api, r).result() == http::status::too_many_requests);
    clock.now += std::chrono::milliseconds(1);  // one second: one request refilled
    HttpResponse again = call(api, r);
    CHECK(again.result() == http::status::ok);
    CHECK(header(again, "RateLimit") == "\"burst\";r=0;t=3");
    clock.now += seconds(60);  // never more than the burst
    for (int i = 0; i < 3; ++i) CHECK(call(api, r).result() == http::status::ok);
    CHECK(call(api, r).result() == http::status::too_many_requests);
}

TEST_CASE("rate limiter: idle buckets are forgotten, and the table has a cap") {
    ManualClock clock;
    RateLimiter limiter(60, 10, clock.fn(), 4);
    for (int i = 0; i < 3; ++i) CHECK(limiter.take("a").allowed);
    limiter.take("b");
    CHECK(limiter.tracked_clients() == 2);
    clock.now += seconds(11);  // both full again: the next request sweeps them
    limiter.take("c");
    CHECK(limiter.tracked_clients() == 1);
    for (std::string client : {"d", "e", "f", "g", "h", "i"}) limiter.take(client);
    CHECK(limiter.tracked_clients() == 4);

    // A forgotten bucket starts full, as it would have been anyway.
    RateLimiter::Decision d = limiter.take("a");
    CHECK(d.allowed);
    CHECK(d.remaining == 9);

    CHECK_THROWS_AS(RateLimiter(0, 10), std::invalid_argument);
    CHECK_THROWS_AS(RateLimiter(60, 0.5), std::invalid_argument);
}

TEST_CASE("http util: paths, percent-escapes, Accept and If-None-Match") {
    CHECK(target_path("/a/b?x=1&y") == "/a/b");
    CHECK(target_path("/a/b") == "/a/b");
    CHECK(decode_segments("/a/b%2Fc/%7e") == std::vector<std::string>{"a", "b/c", "~"});
    CHECK(decode_segments("/") == std::vector<std::string>{""});
    for (std::string_view bad : {"/%", "/%4", "/%g1", "/a/%%"}) CHECK_FALSE(decode_segments(bad).has_value());

    auto accept = [](const char* value) {
        HttpRequest r{http::verb::get, "/", 11};
        if (value) r.set(http::field::accept, value);
        return accepts(r, "application/json");
    };
    CHECK(accept(nullptr));
    CHECK(accept("APPLICATION/JSON"));
    CHECK(accept("text/html;level=1, application/*;q=0.2"));
    CHECK_FALSE(accept("text/html, text/*"));
    CHECK_FALSE(accept("application/json;q=0"));
    CHECK_FALSE(accept("application/*;q=0.5, application/json;q=0"));
    CHECK(accept("application/json;q=0.001, */*;q=0"));

    const std::string etag = strong_etag("body");
    CHECK(etag.size() == 18);
    CHECK(etag == strong_etag("body"));
    CHECK(etag != strong_etag("body."));
    CHECK(none_match_hits(etag, etag));
    CHECK(none_match_hits("W/" + etag, etag));
    CHECK(none_match_hits("\"a,b\", " + etag, etag));  // a comma inside a tag is not a separator
    CHECK(none_match_hits("*", etag));
    CHECK_FALSE(none_match_hits("\"a,b\"", etag));
    CHECK_FALSE(none_match_hits(etag.substr(1, 16), etag));  // unquoted is another tag
}

// ---- MCP ------------------------------------------------------------------------

namespace {

struct Mcp {
    Book book = test_book();
    BookApi api{book, {.requests_per_minute = 6000, .burst = 1000}};

    // POSTs `body` (raw text) to /api/mcp with the given extra headers.
    HttpResponse post(const std::string& body, std::initializer_list<std::pair<const char*, std::string>> headers = {}) {
        HttpRequest r = request(http::verb::post, "/api/mcp");
        r.set(http::field::content_type, "application/json");
        r.set(http::field::accept, "application/json, text/event-stream");
        for (auto& [name, value] : headers) r.set(name, value);
        r.body() = body;
        r.prepare_payload();
        return call(api, r);
    }
    HttpResponse rpc(const std::string& method, json::object params = {},
                     std::initializer_list<std::pair<const char*, std::string>> headers = {}) {
        return post(json::serialize(json::object{{"jsonrpc", "2.0"}, {"id", 7}, {"method", method},
                                                 {"params", std::move(params)}}),
                    headers);
    }
    // A 2026-07-28 request: the _meta envelope and the mirroring headers.
    HttpResponse stateless(const std::string& method, json::object params = {}, std::string version = "2026-07-28") {
        params["_meta"] = json::object{{"io.modelcontextprotocol/protocolVersion", version},
                                       {"io.modelcontextprotocol/clientCapabilities", json::object{}}};
        std::string name = params.contains("name") ? std::string(params.at("name").as_string()) : "";
        if (name.empty()) return rpc(method, params, {{"MCP-Protocol-Version", version}, {"Mcp-Method", method}});
        return rpc(method, params, {{"MCP-Protocol-Version", version}, {"Mcp-Method", method}, {"Mcp-Name", name}});
    }
};

json::object result_of(const HttpResponse& res) {
    CHECK(res.result() == http::status::ok);
    CHECK(res[http::field::content_type] == "application/json");
    json::object body = body_of(res);
    CHECK(body.at("jsonrpc") == "2.0");
    CHECK(body.at("id") == 7);
    REQUIRE(body.contains("result"));
    return body.at("result").as_object();
}

// The error's code, after checking the HTTP status and the JSON-RPC envelope.
int64_t error_code(const HttpResponse& res, http::status status, bool null_id = false) {
    CHECK(res.result() == status);
    json::object body = body_of(res);
    CHECK(body.at("jsonrpc") == "2.0");
    if (null_id) CHECK(body.at("id").is_null());
    REQUIRE(body.contains("error"));
    CHECK(body.at("error").at("message").as_string().size() > 0);
    return body.at("error").at("code").to_number<int64_t>();
}

json::object tool_args(const std::string& name, json::object arguments) {
    return {{"name", name}, {"arguments", std::move(arguments)}};
}

}  // namespace

TEST_CASE("mcp: the handshake revisions: initialize negotiates, then tools/list, tools/call and ping") {
    Mcp m;
    for (std::string version : {"2025-06-18", "2025-11-25"}) {
        json::object init = result_of(m.rpc("initialize", {{"protocolVersion", version},
                                                           {"capabilities", json::object{}},
                                                           {"clientInfo", {{"name", "t"}, {"version", "1"}}}}));
        CHECK(init.at("protocolVersion").as_string() == version);
        CHECK(init.at("capabilities").at("tools").is_object());
        CHECK(init.at("serverInfo").at("name") == "minfer-book");
    }
    // A version it does not speak: the latest handshake one.
    for (std::string version : {"2024-11-05", "2026-07-28", "1999-01-01"})
        CHECK(result_of(m.rpc("initialize", {{"protocolVersion", version}})).at("protocolVersion") == "2025-11-25");
    CHECK(error_code(m.rpc("initialize", {}), http::status::ok) == -32602);

    HttpResponse note = m.post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                               {{"MCP-Protocol-Version", "2025-11-25"}});
    CHECK(note.result() == http::status::accepted);
    CHECK(note.body().empty());

    const auto v = std::pair<const char*, std::string>{"MCP-Protocol-Version", "2025-11-25"};
    json::object listed = result_of(m.rpc("tools/list", {}, {v}));
    std::vector<std::string> names;
    for (const json::value& t : listed.at("tools").as_array()) {
        names.push_back(std::string(t.at("name").as_string()));
        CHECK(t.at("inputSchema").at("type") == "object");
        CHECK(t.at("outputSchema").at("type") == "object");
        CHECK(t.at("description").as_string().size() > 0);
    }
    CHECK(names == std::vector<std::string>{"list_chapters", "get_chapter", "search_glossary", "get_section", "search"});
    CHECK_FALSE(listed.contains("resultType"));  // a 2026-07-28 field only

    json::object chapters = result_of(m.rpc("tools/call", tool_args("list_chapters", {}), {v}));
    CHECK(chapters.at("isError") == false);
    const json::array& list = chapters.at("structuredContent").at("chapters").as_array();
    CHECK(list.size() == m.book.chapters.size());
    // The text item is the structured content, serialized.
    CHECK(json::parse(chapters.at("content").at(0).at("text").as_string()) == chapters.at("structuredContent"));
    CHECK(result_of(m.rpc("ping", {}, {v})).empty());
}

TEST_CASE("mcp: get_chapter and search_glossary - an unknown chapter is a tool error, not a protocol one") {
    Mcp m;
    json::object chapter = result_of(m.rpc("tools/call", tool_args("get_chapter", {{"slug", "introduction"}})));
    CHECK(chapter.at("isError") == false);
    CHECK(chapter.at("structuredContent").at("markdown").as_string() == m.book.chapters[0].markdown);
    CHECK(chapter.at("structuredContent").at("sections").as_array().size() == 2);

    json::object missing = result_of(m.rpc("tools/call", tool_args("get_chapter", {{"slug", "nope"}})));
    CHECK(missing.at("isError") == true);
    CHECK_FALSE(missing.contains("structuredContent"));
    CHECK(missing.at("content").at(0).at("text").as_string().find("introduction") != json::string::npos);

    // Case-insensitive on term and definition; term matches first.
    json::object found = result_of(m.rpc("tools/call", tool_args("search_glossary", {{"query", "kv"}})));
    const json::array& matches = found.at("structuredContent").at("matches").as_array();
    REQUIRE(matches.size() == 2);
    CHECK(matches[0].at("id") == "kv-cache");
    CHECK(matches[0].at("url") == "/chapters/glossary#kv-cache");
    CHECK(matches[0].at("see_also").at(0) == "paged-attention");
    CHECK(matches[1].at("id") == "paged-attention");
    json::object none = result_of(m.rpc("tools/call", tool_args("search_glossary", {{"query", "THREADS"}})));
    CHECK(none.at("structuredContent").at("matches").as_array().size() == 1);
    json::object nothing = result_of(m.rpc("tools/call", tool_args("search_glossary", {{"query", "zzz"}})));
    CHECK(nothing.at("structuredContent").at("matches").as_array().empty());
}

TEST_CASE("mcp: 2026-07-28 is stateless: server/discover, and every request carries its version") {
    Mcp m;
    json::object discover = result_of(m.stateless("server/discover"));
    CHECK(discover.at("resultType") == "complete");
    CHECK(discover.at("supportedVersions") == json::array{"2025-06-18", "2025-11-25", "2026-07-28"});
    CHECK(discover.at("capabilities").at("tools").is_object());
    CHECK(discover.at("cacheScope") == "public");
    CHECK(discover.at("ttlMs").to_number<int64_t>() > 0);
    CHECK(discover.at("_meta").at("io.modelcontextprotocol/serverInfo").at("name") == "minfer-book");

    json::object listed = result_of(m.stateless("tools/list"));
    CHECK(listed.at("tools").as_array().size() == 5);
    CHECK(listed.at("resultType") == "complete");
    json::object called = result_of(m.stateless("tools/call", tool_args("get_chapter", {{"slug", "foundations"}})));
    CHECK(called.at("resultType") == "complete");
    CHECK(called.at("structuredContent").at("slug") == "foundations");

    // No handshake in this revision: ping is gone, an unknown method is a 404.
    CHECK(error_code(m.stateless("ping"), http::status::not_found) == -32601);
    CHECK(error_code(m.stateless("resources/list"), http::status::not_found) == -32601);
    // Invalid params are 400 here.
    CHECK(error_code(m.stateless("tools/call", tool_args("get_chapter", {})), http::status::bad_request) == -32602);
}

TEST_CASE("mcp: 2026-07-28 checks the envelope, the mirroring headers and the version") {
    Mcp m;
    // No _meta.
    CHECK(error_code(m.rpc("tools/list", {}, {{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/list"}}),
                     http::status::bad_request) == -32602);
    // Headers that disagree with the body.
    json::object meta{{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                                 {"io.modelcontextprotocol/clientCapabilities", json::object{}}}}};
    CHECK(error_code(m.rpc("tools/list", meta, {{"Mcp-Method", "tools/list"}}), http::status::bad_request) == -32020);
    CHECK(error_code(m.rpc("tools/list", meta, {{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}}),
                     http::status::bad_request) == -32020);
    json::object call = meta;
    call["name"] = "list_chapters";
    CHECK(error_code(m.rpc("tools/call", call,
                           {{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}, {"Mcp-Name", "x"}}),
                     http::status::bad_request) == -32020);
    // The name may come base64-wrapped.
    CHECK(result_of(m.rpc("tools/call", call,
                          {{"MCP-Protocol-Version", "2026-07-28"},
                           {"Mcp-Method", "tools/call"},
                           {"Mcp-Name", "=?base64?bGlzdF9jaGFwdGVycw==?="}}))
              .at("isError") == false);
    // A version it does not serve: -32022 naming the ones it does.
    HttpResponse old = m.stateless("tools/list", {}, "2027-01-01");
    CHECK(error_code(old, http::status::bad_request) == -32022);
    CHECK(body_of(old).at("error").at("data").at("requested") == "2027-01-01");
    CHECK(body_of(old).at("error").at("data").at("supported").as_array().size() == 3);
    // An unsupported MCP-Protocol-Version header is a 400 whatever the body.
    CHECK(error_code(m.rpc("tools/list", {}, {{"MCP-Protocol-Version", "1999-01-01"}}), http::status::bad_request) ==
          -32022);
    CHECK(m.post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", {{"MCP-Protocol-Version", "1999-01-01"}})
              .result() == http::status::bad_request);
}

TEST_CASE("mcp: JSON-RPC errors: parse error, invalid request, unknown method, invalid params") {
    Mcp m;
    CHECK(error_code(m.post("{not json"), http::status::bad_request, true) == -32700);
    CHECK(error_code(m.post("[]"), http::status::bad_request, true) == -32600);
    CHECK(error_code(m.post(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])"), http::status::bad_request, true) ==
          -32600);
    CHECK(error_code(m.post("42"), http::status::bad_request, true) == -32600);
    CHECK(error_code(m.post(R"({"jsonrpc":"1.0","id":7,"method":"ping"})"), http::status::bad_request) == -32600);
    CHECK(error_code(m.post(R"({"jsonrpc":"2.0","id":7,"method":3})"), http::status::bad_request) == -32600);
    CHECK(error_code(m.post(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})"), http::status::bad_request, true) ==
          -32600);
    CHECK(error_code(m.post(R"({"jsonrpc":"2.0","id":null,"method":"ping"})"), http::status::bad_request, true) ==
          -32600);
    CHECK(error_code(m.post(R"({"jsonrpc":"2.0","id":7,"method":"ping","params":[1]})"), http::status::bad_request) ==
          -32600);
    CHECK(error_code(m.post(R"({"jsonrpc":"2.0","id":7})"), http::status::bad_request) == -32600);

    CHECK(error_code(m.rpc("resources/list"), http::status::ok) == -32601);
    CHECK(error_code(m.rpc("tools/call", tool_args("no_such_tool", {})), http::status::ok) == -32602);
    CHECK(error_code(m.rpc("tools/call", {{"arguments", json::object{}}}), http::status::ok) == -32602);
    CHECK(error_code(m.rpc("tools/call", {{"name", "get_chapter"}, {"arguments", "x"}}), http::status::ok) == -32602);
    CHECK(error_code(m.rpc("tools/call", tool_args("get_chapter", {})), http::status::ok) == -32602);
    CHECK(error_code(m.rpc("tools/call", tool_args("get_chapter", {{"slug", 3}})), http::status::ok) == -32602);
    CHECK(error_code(m.rpc("tools/call", tool_args("get_chapter", {{"slug", "intro"}, {"x", 1}})), http::status::ok) ==
          -32602);
    CHECK(error_code(m.rpc("tools/call", tool_args("search_glossary", {{"query", ""}})), http::status::ok) == -32602);
    CHECK(error_code(m.rpc("tools/call", tool_args("list_chapters", {{"slug", "x"}})), http::status::ok) == -32602);

    // A string id is echoed; a client's response is acknowledged.
    json::object pong = body_of(m.post(R"({"jsonrpc":"2.0","id":"abc","method":"ping"})"));
    CHECK(pong.at("id") == "abc");
    CHECK(m.post(R"({"jsonrpc":"2.0","id":"s1","result":{}})").result() == http::status::accepted);
}

TEST_CASE("mcp: POST only - Origin checked against DNS rebinding - Accept and Content-Type") {
    Mcp m;
    HttpResponse get = call(m.api, request(http::verb::get, "/api/mcp"));
    CHECK(error_code(get, http::status::method_not_allowed, true) == -32600);
    CHECK(get[http::field::allow] == "POST");
    CHECK(call(m.api, request(http::verb::delete_, "/api/mcp")).result() == http::status::method_not_allowed);

    const std::string ping = R"({"jsonrpc":"2.0","id":7,"method":"ping"})";
    for (std::string evil : {"http://evil.example", "http://evil.example:8000", "null", "http://localhost.evil.example"})
        CHECK(error_code(m.post(ping, {{"Origin", evil}}), http::status::forbidden, true) == -32000);
    for (std::string fine : {"http://localhost:8000", "http://127.0.0.1:9999", "http://[::1]:8000",
                             "http://LOCALHOST:8000/"})
        CHECK(m.post(ping, {{"Origin", fine}}).result() == http::status::ok);
    // Its own address, when that is an IP address: a page from the server itself.
    CHECK(m.post(ping, {{"Host", "192.168.1.5:8000"}, {"Origin", "http://192.168.1.5:8000"}}).result() ==
          http::status::ok);
    CHECK(m.post(ping, {{"Host", "[fd00::5]:8000"}, {"Origin", "http://[fd00::5]:8000"}}).result() ==
          http::status::ok);
    CHECK(m.post(ping, {{"Host", "192.168.1.5:8000"}, {"Origin", "http://192.168.1.6:8000"}}).result() ==
          http::status::forbidden);
    // A name that matches Host is what DNS rebinding sends: refused.
    CHECK(m.post(ping, {{"Host", "evil.example:8000"}, {"Origin", "http://evil.example:8000"}}).result() ==
          http::status::forbidden);

    CHECK(m.post(ping, {{"Accept", "text/event-stream"}}).result() == http::status::not_acceptable);
    CHECK(m.post(ping, {{"Content-Type", "text/plain"}}).result() == http::status::unsupported_media_type);
    CHECK(m.post(ping, {{"Content-Type", "application/json; charset=utf-8"}}).result() == http::status::ok);
    // MCP answers carry the rate-limit fields like the rest of /api.
    CHECK_FALSE(std::string(m.post(ping)["RateLimit"]).empty());
}
