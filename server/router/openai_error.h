// The OpenAI error body the router answers with,
// {"error": {"message", "type", "param", "code"}}: the shape `minfer serve`
// gives (server/openai_json.cpp). Written again here because the router links
// no engine: it only moves bytes between clients and instances.
#pragma once

#include <string>

#include "server/http/http_server.h"

namespace minfer::router {

// The body as JSON text; the type defaults to the status's (BadRequestError, ...).
std::string error_json(http::status status, const std::string& message, const char* type = nullptr);
HttpResponse error_response(http::status status, const std::string& message, unsigned version,
                            const char* type = nullptr);
// The same error as the last events of an SSE stream that already began:
// `data: {"error": ...}` then `data: [DONE]`, so a client's stream ends cleanly.
std::string error_events(http::status status, const std::string& message);

}  // namespace minfer::router
