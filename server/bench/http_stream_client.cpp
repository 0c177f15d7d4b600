#include "server/bench/http_stream_client.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

namespace minfer::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

Url parse_url(const std::string& text) {
    const std::string scheme = "http://";
    if (text.rfind("https://", 0) == 0) throw std::invalid_argument("https is not supported: " + text);
    if (text.rfind(scheme, 0) != 0) throw std::invalid_argument("a base URL starts with http://, got '" + text + "'");
    std::string rest = text.substr(scheme.size());
    Url u;
    const size_t slash = rest.find('/');
    if (slash != std::string::npos) {
        u.path = rest.substr(slash);
        rest.resize(slash);
        while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
    }
    const size_t colon = rest.rfind(':');
    if (colon != std::string::npos && rest.find(']', colon) == std::string::npos) {
        u.port = rest.substr(colon + 1);
        rest.resize(colon);
        if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos || std::stoul(u.port) > 65535)
            throw std::invalid_argument("bad port in '" + text + "'");
    }
    if (rest.size() >= 2 && rest.front() == '[' && rest.back() == ']') rest = rest.substr(1, rest.size() - 2);
    if (rest.empty()) throw std::invalid_argument("no host in '" + text + "'");
    u.host = rest;
    return u;
}

HttpClient::HttpClient(asio::io_context& io, Url url, std::string api_key)
    : io_(io), url_(std::move(url)), api_key_(std::move(api_key)) {}

asio::awaitable<std::unique_ptr<beast::tcp_stream>> HttpClient::connect(std::chrono::steady_clock::time_point deadline) {
    if (endpoints_.empty()) {
        tcp::resolver resolver(io_);
        endpoints_ = co_await resolver.async_resolve(url_.host, url_.port, use_awaitable);
    }
    auto s = std::make_unique<beast::tcp_stream>(io_);
    s->expires_at(deadline);
    co_await s->async_connect(endpoints_, use_awaitable);
    s->socket().set_option(tcp::no_delay(true));  // small requests, sent at once
    co_return s;
}

asio::awaitable<HttpResult> HttpClient::request(std::string method, std::string target, std::string body,
                                                std::chrono::steady_clock::duration timeout,
                                                std::function<void(std::string_view)> on_body) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    HttpResult res;
    http::request<http::string_body> req{http::string_to_verb(method), url_.path + target, 11};
    req.set(http::field::host, url_.host + ":" + url_.port);
    req.set(http::field::user_agent, "minfer-bench");
    if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();

    // A kept-alive connection the server has meanwhile closed fails before any
    // answer arrives; then, and only then, the request is retried once on a
    // fresh connection.
    for (int attempt = 0;; attempt++) {
        std::unique_ptr<beast::tcp_stream> conn;
        bool reused = false, answered = false;
        const char* phase = "connect";
        try {
            if (!idle_.empty()) {
                conn = std::move(idle_.back());
                idle_.pop_back();
                reused = true;
            } else {
                conn = co_await connect(deadline);
            }
            conn->expires_at(deadline);
            phase = "send";
            co_await http::async_write(*conn, req, use_awaitable);
            phase = "read";
            beast::flat_buffer buf;
            http::response_parser<http::string_body> parser;
            parser.body_limit(boost::none);
            co_await http::async_read_header(*conn, buf, parser, use_awaitable);
            answered = true;
            res.status = static_cast<int>(parser.get().result_int());
            const bool stream = on_body && res.status == 200;
            while (!parser.is_done()) {
                co_await http::async_read_some(*conn, buf, parser, use_awaitable);
                std::string& got = parser.get().body();
                // Hand over what arrived and forget it: the body of a long
                // stream never piles up.
                if (stream && !got.empty()) {
                    on_body(got);
                    got.clear();
                }
            }
            if (stream && !parser.get().body().empty()) on_body(parser.get().body());
            if (!stream) res.body = std::move(parser.get().body());
            if (parser.get().keep_alive()) idle_.push_back(std::move(conn));
            co_return res;
        } catch (const boost::system::system_error& e) {
            if (reused && !answered && attempt == 0) continue;
            if (e.code() == beast::error::timeout)
                res.error = "timed out after " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                            " s (--timeout)";
            else
                res.error = std::string(phase) + " " + url_.host + ":" + url_.port + ": " + e.code().message();
            if (answered) res.error = "HTTP " + std::to_string(res.status) + " answer broke off: " + res.error;
            co_return res;
        } catch (const std::exception& e) {  // from on_body: a malformed stream
            res.error = e.what();
            co_return res;
        }
    }
}

HttpResult http_get(const Url& url, const std::string& api_key, const std::string& target,
                    std::chrono::steady_clock::duration timeout) {
    asio::io_context io;
    HttpClient client(io, url, api_key);
    HttpResult out;
    asio::co_spawn(
        io, [&]() -> asio::awaitable<void> { out = co_await client.request("GET", target, "", timeout); },
        asio::detached);
    io.run();
    return out;
}

}  // namespace minfer::bench
