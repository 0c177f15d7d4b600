#include "server/router/openai_error.h"

#include <boost/json.hpp>

namespace minfer::router {

namespace json = boost::json;

namespace {

// The names `minfer serve` uses (vLLM's), and one for the router's own failure upstream.
const char* error_type(http::status status) {
    switch (status) {
        case http::status::unauthorized: return "AuthenticationError";
        case http::status::not_found: return "NotFoundError";
        case http::status::method_not_allowed: return "MethodNotAllowedError";
        case http::status::payload_too_large: return "RequestTooLargeError";
        case http::status::bad_gateway: return "BadGatewayError";
        case http::status::service_unavailable: return "ServiceUnavailableError";
        case http::status::internal_server_error: return "InternalServerError";
        default: return "BadRequestError";
    }
}

json::object error_object(http::status status, const std::string& message, const char* type) {
    return json::object{{"error", json::object{{"message", message},
                                               {"type", type ? type : error_type(status)},
                                               {"param", nullptr},
                                               {"code", static_cast<int>(status)}}}};
}

}  // namespace

std::string error_json(http::status status, const std::string& message, const char* type) {
    return json::serialize(error_object(status, message, type));
}

HttpResponse error_response(http::status status, const std::string& message, unsigned version, const char* type) {
    HttpResponse res{status, version};
    res.set(http::field::content_type, "application/json");
    res.body() = error_json(status, message, type);
    return res;
}

std::string error_events(http::status status, const std::string& message) {
    return "data: " + error_json(status, message) + "\n\ndata: [DONE]\n\n";
}

}  // namespace minfer::router
