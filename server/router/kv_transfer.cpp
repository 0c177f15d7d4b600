#include "server/router/kv_transfer.h"

#include <fmt/format.h>

#include <optional>
#include <random>
#include <stdexcept>

namespace minfer::router {

namespace json = boost::json;

namespace {

// The "error" object of an OpenAI error body.
std::optional<json::object> error_of(const std::string& body) {
    boost::system::error_code ec;
    json::value parsed = json::parse(body, ec);
    if (ec || !parsed.is_object()) return std::nullopt;
    json::value* error = parsed.as_object().if_contains("error");
    if (!error || !error->is_object()) return std::nullopt;
    return std::move(error->as_object());
}

}  // namespace

std::string decode_address_from(const std::string& answer, const std::string& instance_host) {
    boost::system::error_code ec;
    const json::value v = json::parse(answer, ec);
    if (ec || !v.is_object()) throw std::invalid_argument("/v1/kv_transfer did not answer a JSON object");
    const json::object& o = v.as_object();
    const json::value* role = o.if_contains("role");
    if (!role || !role->is_string() || role->get_string() != "decode")
        throw std::invalid_argument(fmt::format("/v1/kv_transfer says role {}, not \"decode\"",
                                                role ? json::serialize(*role) : "(none)"));
    const json::value* address = o.if_contains("address");
    if (!address || !address->is_string()) throw std::invalid_argument("/v1/kv_transfer gives no address");
    std::string a(address->get_string());
    if (a.starts_with("mpi://") && a.size() > 6) return a;
    if (!a.starts_with("tcp://")) throw std::invalid_argument("/v1/kv_transfer's address '" + a + "' is not tcp:// or mpi://");
    // tcp://HOST:PORT, the host maybe [v6].
    const std::string rest = a.substr(6);
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
        throw std::invalid_argument("/v1/kv_transfer's address '" + a + "' is not tcp://HOST:PORT");
    const std::string host = rest.substr(0, colon), port = rest.substr(colon + 1);
    if (host != "0.0.0.0" && host != "[::]" && host != "::") return a;
    const bool v6 = instance_host.find(':') != std::string::npos;
    return "tcp://" + (v6 ? "[" + instance_host + "]" : instance_host) + ":" + port;
}

std::string new_transfer_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return fmt::format("{:016x}{:016x}", rng(), rng());
}

json::object prefill_body(const json::object& client, const std::string& decode_address,
                          const std::string& transfer_id) {
    json::object body = client;
    body.erase("max_completion_tokens");
    body.erase("min_tokens");
    body.erase("stream_options");
    body["max_tokens"] = 1;
    body["stream"] = false;
    body["n"] = 1;
    body["kv_transfer_params"] = json::object{
        {"do_remote_decode", true}, {"remote_address", decode_address}, {"transfer_id", transfer_id}};
    return body;
}

json::object decode_body(const json::object& client, const std::string& transfer_id) {
    json::object body = client;
    body["kv_transfer_params"] = json::object{{"transfer_id", transfer_id}};
    return body;
}

bool is_kv_transfer_error(int status, const std::string& body) {
    if (status != 502) return false;
    const auto error = error_of(body);
    const json::value* type = error ? error->if_contains("type") : nullptr;
    return type && type->is_string() && type->get_string() == "kv_transfer_error";
}

std::string error_message_of(const std::string& body) {
    const auto error = error_of(body);
    const json::value* message = error ? error->if_contains("message") : nullptr;
    return message && message->is_string() ? std::string(message->get_string()) : "";
}

}  // namespace minfer::router
