// RFC 9457 problem details: the body of every error the book's JSON API
// sends (application/problem+json). /api/mcp answers in JSON-RPC instead.
#pragma once

#include <string>

#include "server/http/http_server.h"

namespace minfer::book {

// {"type":"about:blank","title":<the status's reason phrase>,"status",
// "detail","instance":<the request's path>}. With type about:blank the title
// is the HTTP reason phrase (RFC 9457 4.2.1); `detail` says what went wrong
// for this request.
HttpResponse problem(const HttpRequest& request, http::status status, const std::string& detail);

}  // namespace minfer::book
