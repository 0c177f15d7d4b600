#include "book/site/site_http.h"

#include "book/site/api.h"
#include "book/site/ask_ai.h"
#include "book/site/gzip.h"
#include "book/site/http_util.h"

namespace minfer::book {

namespace {

HttpResponse make_response(http::status status, unsigned version, std::string body, std::string content_type) {
    HttpResponse res{status, version};
    res.set(http::field::content_type, content_type);
    // Every script, style and font comes from this site; figures draw inline SVG and styles.
    res.set("Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; "
            "base-uri 'none'; frame-ancestors 'none'");
    res.set("X-Content-Type-Options", "nosniff");
    res.set("Referrer-Policy", "no-referrer");
    res.body() = std::move(body);
    return res;
}

// The vendored libraries never change while the site runs; pages may between runs.
std::string cache_control_for(std::string_view path) {
    if (path.starts_with("/static/katex/") || path.starts_with("/static/highlight/")) return "public, max-age=86400";
    return "no-cache";
}

// A text answer goes gzipped to a client that accepts it. The compressed
// bytes are another representation, so they carry an ETag of their own.
HttpResponse ok(const HttpRequest& req, std::string_view path, std::string body, std::string content_type) {
    const bool compressible = worth_gzip(content_type, body.size());
    const bool compress = compressible && accepts_gzip(req);
    std::string etag = strong_etag(body);
    if (compress) etag.insert(etag.size() - 1, "-gzip");
    HttpResponse res = [&] {
        if (const auto inm = req.find(http::field::if_none_match); inm != req.end() && none_match_hits(inm->value(), etag))
            return make_response(http::status::not_modified, req.version(), "", content_type);
        return make_response(http::status::ok, req.version(), compress ? gzip(body) : std::move(body), content_type);
    }();
    if (compress) res.set(http::field::content_encoding, "gzip");
    if (compressible) res.set(http::field::vary, "Accept-Encoding");
    res.set(http::field::etag, etag);
    res.set(http::field::cache_control, cache_control_for(path));
    return res;
}

}  // namespace

HttpResponse plain_response(http::status status, const std::string& message, unsigned version) {
    return make_response(status, version, message + "\n", "text/plain; charset=utf-8");
}

std::string base_url_of(const HttpRequest& request) {
    const auto host = request.find(http::field::host);
    if (host == request.end() || host->value().empty() || host->value().size() > 255) return "";
    for (char c : host->value()) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '-' || c == ':' || c == '[' || c == ']';
        if (!ok) return "";
    }
    // Behind a TLS-terminating proxy the links must say https.
    const auto proto = request.find("X-Forwarded-Proto");
    const bool https = proto != request.end() && proto->value() == "https";
    return (https ? "https://" : "http://") + std::string(host->value());
}

HttpResponse SiteHandler::respond(const HttpRequest& req) const {
    const unsigned v = req.version();
    const std::string_view target = req.target();
    const std::string path(target.substr(0, target.find('?')));
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
        HttpResponse res = plain_response(http::status::method_not_allowed,
                                          "method not allowed: the book's pages take GET and HEAD", v);
        res.set(http::field::allow, "GET, HEAD");
        return res;
    }
    std::optional<HttpResponse> res;
    if (path == "/llms.txt") {
        res = ok(req, path, site_.llms_txt(base_url_of(req)), "text/plain; charset=utf-8");
    } else if (path == "/llms-full.txt") {
        res = ok(req, path, site_.llms_full_txt(base_url_of(req)), "text/plain; charset=utf-8");
    } else if (path.starts_with("/source/")) {
        if (std::optional<Resource> page = site_.source_page(std::string_view(path).substr(8)))
            res = ok(req, path, std::move(page->body), page->content_type);
    } else if (const Resource* r = site_.find(path)) {
        res = ok(req, path, r->body, r->content_type);
    } else if (path.size() > 1 && path.ends_with('/') && site_.find(path.substr(0, path.size() - 1))) {
        res = plain_response(http::status::permanent_redirect, "moved", v);
        res->set(http::field::location, path.substr(0, path.size() - 1));
    }
    if (!res) {
        Resource missing = site_.not_found(path);
        res = make_response(http::status::not_found, v, std::move(missing.body), missing.content_type);
    }
    if (req.method() == http::verb::head) {  // the GET's length, no body
        res->content_length(res->body().size());
        res->body().clear();
    }
    return std::move(*res);
}

asio::awaitable<void> SiteHandler::handle(const HttpRequest& request, HttpResponder& responder) {
    if (ask_ && target_path(request.target()) == "/api/ask") {
        co_await ask_->handle(request, responder);
        co_return;
    }
    if (api_) {
        if (std::optional<HttpResponse> answer = api_->handle(request, responder.remote_address())) {
            co_await responder.send(std::move(*answer));
            co_return;
        }
    }
    co_await responder.send(respond(request));
}

}  // namespace minfer::book
