#include "server/router/upstream_client.h"

#include <fmt/format.h>

#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace minfer::router {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

void UpstreamAbort::fire() {
    fired = true;
    if (active) active->close();
}

namespace {

// Makes `conn` the connection an abort closes, for as long as this lives.
struct AbortRegistration {
    UpstreamAbort* abort;
    AbortRegistration(UpstreamAbort* a, beast::tcp_stream* conn) : abort(a) {
        if (abort) abort->active = conn;
    }
    ~AbortRegistration() {
        if (abort) abort->active = nullptr;
    }
};

}  // namespace

UpstreamClient::UpstreamClient(asio::io_context& io, bench::Url url, std::string api_key)
    : io_(io), url_(std::move(url)), api_key_(std::move(api_key)) {}

asio::awaitable<UpstreamAnswer> UpstreamClient::request(http::verb method, std::string target, std::string body,
                                                        Clock::duration timeout, UpstreamAbort* abort,
                                                        BodySink sink) {
    const auto deadline = Clock::now() + timeout;
    UpstreamAnswer out;
    http::request<http::string_body> req{method, url_.path + target, 11};
    req.set(http::field::host, url_.host + ":" + url_.port);
    req.set(http::field::user_agent, "minfer-router");
    if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();

    // A kept-alive connection the instance has meanwhile closed fails before
    // any answer arrives; then, and only then, the request goes again once on
    // a fresh connection.
    for (int attempt = 0;; ++attempt) {
        if (abort && abort->fired) {
            out.abandoned = true;
            out.error = "abandoned: the client went away";
            co_return out;
        }
        bool reused = false, answered = false;
        const char* phase = "connect";
        std::unique_ptr<beast::tcp_stream> conn;
        if (!idle_.empty()) {
            conn = std::move(idle_.back());
            idle_.pop_back();
            reused = true;
        } else {
            conn = std::make_unique<beast::tcp_stream>(io_);
        }
        AbortRegistration registration(abort, conn.get());
        try {
            conn->expires_at(deadline);
            if (!reused) {
                if (endpoints_.empty()) {
                    tcp::resolver resolver(io_);
                    endpoints_ = co_await resolver.async_resolve(url_.host, url_.port, use_awaitable);
                }
                co_await conn->async_connect(endpoints_, use_awaitable);
                conn->socket().set_option(tcp::no_delay(true));  // small requests and SSE events, sent at once
                // An abort while resolving or connecting closed no socket yet.
                if (abort && abort->fired) throw boost::system::system_error(asio::error::operation_aborted);
            }
            phase = "send";
            co_await http::async_write(*conn, req, use_awaitable);
            phase = "read";
            beast::flat_buffer buffer;
            http::response_parser<http::string_body> parser;
            parser.body_limit(boost::none);
            co_await http::async_read_header(*conn, buffer, parser, use_awaitable);
            answered = true;
            out.status = static_cast<int>(parser.get().result_int());
            out.content_type = std::string(parser.get()[http::field::content_type]);
            const bool streaming = sink && out.status == 200;
            while (!parser.is_done()) {
                co_await http::async_read_some(*conn, buffer, parser, use_awaitable);
                std::string& got = parser.get().body();
                if (!streaming || got.empty()) continue;
                // The client takes this piece before the next is read.
                const bool more = co_await sink(out, got);
                got.clear();
                if (!more) {
                    out.abandoned = true;
                    out.error = "abandoned: the client went away";
                    co_return out;  // the connection closes with `conn`
                }
            }
            if (!streaming) out.body = std::move(parser.get().body());
            if (parser.get().keep_alive()) idle_.push_back(std::move(conn));
            co_return out;
        } catch (const boost::system::system_error& e) {
            if (abort && abort->fired) {
                out.abandoned = true;
                out.error = "abandoned: the client went away";
                co_return out;
            }
            if (reused && !answered && attempt == 0) continue;
            if (e.code() == beast::error::timeout)
                out.error = fmt::format("{} {}:{}: timed out", phase, url_.host, url_.port);
            else
                out.error = fmt::format("{} {}:{}: {}", phase, url_.host, url_.port, e.code().message());
            if (answered) out.error = fmt::format("the HTTP {} answer broke off: {}", out.status, out.error);
            co_return out;
        }
    }
}

}  // namespace minfer::router
