// The book's HTTP answers: the API first (book/site/api.h, /api/... and
// /openapi.json), then the site: pages and their .md twins, assets, source
// views, /llms.txt and /llms-full.txt. Pages take GET and HEAD only; unknown
// paths get a 404 page. Client addresses are never logged.
#pragma once

#include "book/site/site.h"
#include "server/http/http_server.h"

namespace minfer::book {

class AskAi;
class BookApi;

class SiteHandler {
public:
    // `api` and `ask` may be null (the site alone; no /api/ask).
    SiteHandler(const Site& site, BookApi* api, const AskAi* ask = nullptr) : site_(site), api_(api), ask_(ask) {}

    asio::awaitable<void> handle(const HttpRequest& request, HttpResponder& responder);

    // The site's own answer (no API), for a request already past the API.
    HttpResponse respond(const HttpRequest& request) const;

private:
    const Site& site_;
    BookApi* api_;
    const AskAi* ask_;
};

// A plain-text answer for requests the HTTP layer refuses (malformed, too large).
HttpResponse plain_response(http::status status, const std::string& message, unsigned version);

// "http://HOST" (https:// when X-Forwarded-Proto says so) from the request's
// Host header, or "" when it is missing or holds anything but a host name, an
// IP address and a port.
std::string base_url_of(const HttpRequest& request);

}  // namespace minfer::book
