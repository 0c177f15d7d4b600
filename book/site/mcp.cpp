#include "book/site/mcp.h"

#include <array>
#include <boost/json.hpp>
#include <optional>

#include "book/site/http_util.h"

namespace minfer::book {

namespace json = boost::json;

namespace {

constexpr std::string_view kStatelessVersion = "2026-07-28";
constexpr std::array<std::string_view, 2> kHandshakeVersions = {"2025-06-18", "2025-11-25"};
constexpr const char* kVersionKey = "io.modelcontextprotocol/protocolVersion";
constexpr const char* kCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities";
constexpr const char* kServerInfoKey = "io.modelcontextprotocol/serverInfo";
// How long a client may cache tools/list and server/discover (the book does
// not change while the server runs); the same as the JSON API's max-age.
constexpr int kCacheTtlMs = 300'000;

constexpr const char* kInstructions =
    "Learn Kernels, a book on GPU kernels and LLM inference performance with the minfer engine as its worked "
    "example. list_chapters gives the table of contents, get_chapter one chapter with its overview, "
    "search_glossary the definitions of terms.";

// JSON-RPC 2.0 codes, and the MCP ones (-32020.. are the 2026-07-28 revision's).
enum Code {
    kParseError = -32700,
    kInvalidRequest = -32600,
    kMethodNotFound = -32601,
    kInvalidParams = -32602,
    kForbidden = -32000,  // implementation-defined: a refused Origin
    kHeaderMismatch = -32020,
    kUnsupportedVersion = -32022,
};

struct RpcError {
    int code;
    std::string message;
    json::value data = nullptr;
};

bool is_handshake(std::string_view v) {
    return std::find(kHandshakeVersions.begin(), kHandshakeVersions.end(), v) != kHandshakeVersions.end();
}
bool is_supported(std::string_view v) { return is_handshake(v) || v == kStatelessVersion; }

json::array supported_versions() {
    json::array out;
    for (std::string_view v : kHandshakeVersions) out.push_back(json::string(v));
    out.push_back(json::string(kStatelessVersion));
    return out;
}

RpcError unsupported_version(std::string_view requested) {
    return {kUnsupportedVersion,
            "Unsupported protocol version \"" + std::string(requested) +
                "\"; 2025-06-18 and 2025-11-25 are served through initialize, 2026-07-28 per request",
            json::object{{"supported", supported_versions()}, {"requested", requested}}};
}

json::object server_info() {
    return {{"name", "minfer-book"}, {"title", "Learn Kernels"}, {"version", MINFER_VERSION}};
}

std::optional<std::string_view> header(const HttpRequest& req, std::string_view name) {
    auto it = req.find(name);
    if (it == req.end()) return std::nullopt;
    return it->value();
}

HttpResponse error_answer(const HttpRequest& req, http::status status, const json::value& id, const RpcError& e) {
    json::object error{{"code", e.code}, {"message", e.message}};
    if (!e.data.is_null()) error["data"] = e.data;
    return no_store_json(req, status, {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}});
}

HttpResponse result_answer(const HttpRequest& req, const json::value& id, json::object result) {
    return no_store_json(req, http::status::ok, {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
}

// 202 Accepted, no body: what a notification or a client's response gets.
HttpResponse accepted(const HttpRequest& req) {
    HttpResponse res{http::status::accepted, req.version()};
    res.prepare_payload();
    return res;
}

// DNS rebinding defence. No Origin (a non-browser client) is fine; a browser
// page may call this server from localhost, or from its own address when that
// is an IP address. A page from any other name is refused even when the Host
// header names the same host: that is just what a rebinding attack looks like
// (evil.example re-resolved to 127.0.0.1 sends Origin and Host evil.example).
bool origin_allowed(const HttpRequest& req) {
    std::optional<std::string_view> origin = header(req, "Origin");
    if (!origin) return true;
    size_t scheme_end = origin->find("://");
    if (scheme_end == std::string_view::npos) return false;  // "null" and the like
    std::string authority = ascii_lower(origin->substr(scheme_end + 3));
    if (!authority.empty() && authority.back() == '/') authority.pop_back();
    if (authority.empty()) return false;
    const std::string host = authority.front() == '['
                                 ? authority.substr(0, authority.find(']') + 1)
                                 : authority.substr(0, authority.find(':'));
    if (host == "localhost" || host == "127.0.0.1" || host == "[::1]") return true;
    boost::system::error_code ec;
    const bool ip_literal = host.front() == '[' || (asio::ip::make_address_v4(host, ec), !ec);
    std::optional<std::string_view> host_header = header(req, "Host");
    return ip_literal && host_header && ascii_lower(*host_header) == authority;
}

// The Mcp-Name header's value: verbatim, or the payload of an "=?base64?...?="
// sentinel (how a client sends a name that is not plain ASCII); nullopt when
// the sentinel does not decode.
std::optional<std::string> decode_header_value(std::string_view v) {
    if (v.size() < 12 || v.substr(0, 9) != "=?base64?" || v.substr(v.size() - 2) != "?=") return std::string(v);
    std::string_view payload = v.substr(9, v.size() - 11);
    std::string out;
    uint32_t bits = 0;
    int nbits = 0;
    for (char c : payload) {
        int value = c >= 'A' && c <= 'Z'   ? c - 'A'
                    : c >= 'a' && c <= 'z' ? c - 'a' + 26
                    : c >= '0' && c <= '9' ? c - '0' + 52
                    : c == '+'             ? 62
                    : c == '/'             ? 63
                                           : -1;
        if (c == '=') break;
        if (value < 0) return std::nullopt;
        bits = (bits << 6) | uint32_t(value);
        nbits += 6;
        if (nbits >= 8) {
            nbits -= 8;
            out += char((bits >> nbits) & 0xFF);
        }
    }
    return out;
}

// The tools/call params: {"name": string, "arguments"?: object}.
json::object call_tool(const BookTools& tools, const json::object& params) {
    const json::value* name = params.if_contains("name");
    if (!name || !name->is_string()) throw InvalidParams("tools/call needs the tool's \"name\" (a string)");
    static const json::object no_arguments;
    const json::value* arguments = params.if_contains("arguments");
    if (arguments && !arguments->is_object() && !arguments->is_null())
        throw InvalidParams("tools/call \"arguments\" must be an object");
    return tools.call(name->as_string(), arguments && arguments->is_object() ? arguments->as_object() : no_arguments);
}

// initialize (the handshake revisions): answer with the client's version when
// it is one of ours, else with the latest we serve by handshake.
json::object initialize(const json::object& params) {
    const json::value* requested = params.if_contains("protocolVersion");
    if (!requested || !requested->is_string()) throw InvalidParams("initialize needs \"protocolVersion\" (a string)");
    std::string_view version = requested->as_string();
    if (!is_handshake(version)) version = kHandshakeVersions.back();
    return {{"protocolVersion", version},
            {"capabilities", {{"tools", json::object{}}}},
            {"serverInfo", server_info()},
            {"instructions", kInstructions}};
}

HttpResponse serve_handshake(const HttpRequest& req, const BookTools& tools, const json::value& id,
                             std::string_view method, const json::object& params) {
    // Here a header outside the handshake versions comes only with initialize.
    if (std::optional<std::string_view> v = header(req, "MCP-Protocol-Version"); v && !is_handshake(*v))
        return error_answer(req, http::status::bad_request, id, unsupported_version(*v));
    try {
        if (method == "initialize") return result_answer(req, id, initialize(params));
        if (method == "ping") return result_answer(req, id, {});
        if (method == "tools/list") return result_answer(req, id, {{"tools", tools.definitions()}});
        if (method == "tools/call") return result_answer(req, id, call_tool(tools, params));
    } catch (const InvalidParams& e) {
        return error_answer(req, http::status::ok, id, {kInvalidParams, e.what()});
    }
    return error_answer(req, http::status::ok, id, {kMethodNotFound, "Method not found: " + std::string(method)});
}

// The 2026-07-28 checks, in the order the revision gives them: the _meta
// envelope, then the headers that mirror it, then the version itself.
std::optional<RpcError> check_stateless(const HttpRequest& req, std::string_view method, const json::object& params) {
    std::optional<std::string_view> version_header = header(req, "MCP-Protocol-Version");
    const json::value* meta = params.if_contains("_meta");
    if (!meta || !meta->is_object() || !meta->as_object().contains(kVersionKey) ||
        !meta->as_object().contains(kCapabilitiesKey)) {
        if (version_header && !is_supported(*version_header)) return unsupported_version(*version_header);
        return RpcError{kInvalidParams, std::string("params._meta must carry \"") + kVersionKey + "\" and \"" +
                                            kCapabilitiesKey + "\""};
    }
    const json::value& version = meta->as_object().at(kVersionKey);
    if (!version_header || !version.is_string() || *version_header != version.as_string())
        return RpcError{kHeaderMismatch, "the MCP-Protocol-Version header must equal _meta's protocol version"};
    if (header(req, "Mcp-Method") != method)
        return RpcError{kHeaderMismatch, "the Mcp-Method header must equal the request's method"};
    if (method == "tools/call") {
        const json::value* name = params.if_contains("name");
        std::optional<std::string_view> name_header = header(req, "Mcp-Name");
        if (name && name->is_string() &&
            (!name_header || decode_header_value(*name_header) != std::string_view(name->as_string())))
            return RpcError{kHeaderMismatch, "the Mcp-Name header must equal the tool's name"};
    }
    if (version.as_string() != kStatelessVersion) return unsupported_version(version.as_string());
    return std::nullopt;
}

HttpResponse serve_stateless(const HttpRequest& req, const BookTools& tools, const json::value& id,
                             std::string_view method, const json::object& params) {
    if (std::optional<RpcError> e = check_stateless(req, method, params))
        return error_answer(req, http::status::bad_request, id, *e);
    json::object result;
    try {
        if (method == "server/discover") {
            result = {{"supportedVersions", supported_versions()},
                      {"capabilities", {{"tools", json::object{}}}},
                      {"instructions", kInstructions},
                      {"ttlMs", kCacheTtlMs},
                      {"cacheScope", "public"}};
        } else if (method == "tools/list") {
            result = {{"tools", tools.definitions()}, {"ttlMs", kCacheTtlMs}, {"cacheScope", "public"}};
        } else if (method == "tools/call") {
            result = call_tool(tools, params);
        } else {
            return error_answer(req, http::status::not_found, id,
                                {kMethodNotFound, "Method not found: " + std::string(method)});
        }
    } catch (const InvalidParams& e) {
        return error_answer(req, http::status::bad_request, id, {kInvalidParams, e.what()});
    }
    // Every 2026-07-28 result says it is complete and who answered.
    result["resultType"] = "complete";
    result["_meta"] = json::object{{kServerInfoKey, server_info()}};
    return result_answer(req, id, std::move(result));
}

bool is_json_content(const HttpRequest& req) {
    std::string type = ascii_lower(req[http::field::content_type]);
    type = type.substr(0, type.find(';'));
    while (!type.empty() && type.back() == ' ') type.pop_back();
    return type == "application/json";
}

// A person who follows the link in llms.txt: a page that says what this address is,
// rather than a JSON-RPC error (a program's GET still gets the 405).
std::optional<HttpResponse> page_for_a_browser(const HttpRequest& req) {
    const auto accept = req.find(http::field::accept);
    if (req.method() != http::verb::get || accept == req.end() ||
        ascii_lower(accept->value()).find("text/html") == std::string::npos)
        return std::nullopt;
    HttpResponse res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/html; charset=utf-8");
    res.body() =
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Learn Kernels: MCP server</title>"
        "</head><body>\n<h1>The book's MCP server</h1>\n<p>This address speaks the Model Context Protocol "
        "(Streamable HTTP): an MCP client POSTs JSON-RPC 2.0 messages here. Its tools are list_chapters, "
        "get_chapter, get_section, search and search_glossary; all read the book, none writes.</p>\n"
        "<p>To read the book, go to <a href=\"/\">its contents</a>; to connect a client, see "
        "<a href=\"/developers\">the developer page</a>.</p>\n</body></html>\n";
    res.prepare_payload();
    return res;
}

// The HTTP-level refusals, before the body is read as JSON-RPC.
std::optional<HttpResponse> refuse_transport(const HttpRequest& req) {
    if (std::optional<HttpResponse> page = page_for_a_browser(req)) return page;
    const json::value no_id = nullptr;
    if (!origin_allowed(req))
        return error_answer(req, http::status::forbidden, no_id,
                            {kForbidden, "Forbidden: this Origin may not call the MCP server"});
    if (req.method() != http::verb::post) {
        HttpResponse res = error_answer(req, http::status::method_not_allowed, no_id,
                                        {kInvalidRequest, "POST a JSON-RPC message; this server opens no SSE stream"});
        res.set(http::field::allow, "POST");
        return res;
    }
    if (!accepts(req, "application/json"))
        return error_answer(req, http::status::not_acceptable, no_id,
                            {kInvalidRequest, "the server answers application/json; Accept must allow it"});
    if (!is_json_content(req))
        return error_answer(req, http::status::unsupported_media_type, no_id,
                            {kInvalidRequest, "the body must be application/json"});
    return std::nullopt;
}

}  // namespace

McpServer::McpServer(const Book& book) : tools_(book) {}

HttpResponse McpServer::handle(const HttpRequest& req) const {
    if (std::optional<HttpResponse> refusal = refuse_transport(req)) return std::move(*refusal);
    const json::value no_id = nullptr;
    boost::system::error_code ec;
    json::value parsed = json::parse(req.body(), ec);
    if (ec) return error_answer(req, http::status::bad_request, no_id, {kParseError, "Parse error: " + ec.message()});
    if (!parsed.is_object())
        return error_answer(req, http::status::bad_request, no_id,
                            {kInvalidRequest, parsed.is_array() ? "Invalid Request: batches are not supported"
                                                                : "Invalid Request: not a JSON-RPC object"});
    const json::object& msg = parsed.as_object();
    const json::value* id = msg.if_contains("id");
    const bool id_ok = id && (id->is_string() || id->is_int64() || id->is_uint64());
    const json::value& reply_id = id_ok ? *id : no_id;
    auto invalid = [&](const std::string& why) {
        return error_answer(req, http::status::bad_request, reply_id, {kInvalidRequest, "Invalid Request: " + why});
    };

    const json::value* jsonrpc = msg.if_contains("jsonrpc");
    if (!jsonrpc || !jsonrpc->is_string() || jsonrpc->as_string() != "2.0") return invalid("\"jsonrpc\" must be \"2.0\"");
    const json::value* method = msg.if_contains("method");
    if (!method) {
        // A client's response (to a request this server never sends): acknowledged.
        if (id_ok && (msg.contains("result") || msg.contains("error"))) return accepted(req);
        return invalid("no \"method\"");
    }
    if (!method->is_string()) return invalid("\"method\" must be a string");
    if (id && !id_ok) return invalid("\"id\" must be a string or an integer");
    static const json::object no_params;
    const json::value* params_value = msg.if_contains("params");
    if (params_value && !params_value->is_object()) return invalid("\"params\" must be an object");
    const json::object& params = params_value ? params_value->as_object() : no_params;
    const std::string_view name = method->as_string();
    std::optional<std::string_view> version_header = header(req, "MCP-Protocol-Version");

    if (!id) {  // a notification: nothing to answer, but not in a version we do not speak
        if (version_header && !is_supported(*version_header))
            return error_answer(req, http::status::bad_request, no_id, unsupported_version(*version_header));
        return accepted(req);
    }
    const json::value* meta = params.if_contains("_meta");
    const bool meta_version = meta && meta->is_object() && meta->as_object().contains(kVersionKey);
    const bool stateless = name != "initialize" && (meta_version || name == "server/discover" ||
                                                      (version_header && !is_handshake(*version_header)));
    return stateless ? serve_stateless(req, tools_, reply_id, name, params)
                     : serve_handshake(req, tools_, reply_id, name, params);
}

}  // namespace minfer::book
