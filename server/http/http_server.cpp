#include "server/http/http_server.h"

#include <spdlog/spdlog.h>

namespace minfer {

using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

namespace {

// use_awaitable, but failures come back as an error_code instead of an exception.
auto no_throw(beast::error_code& ec) { return asio::redirect_error(use_awaitable, ec); }

}  // namespace

// ---- HttpResponder ----------------------------------------------------------------

awaitable<void> HttpResponder::send(HttpResponse res) {
    status_ = res.result_int();
    res.version(version_);
    res.keep_alive(keep_alive());
    // A HEAD answer has no body but the Content-Length of the GET's: keep it.
    if (!(res.body().empty() && res.has_content_length())) res.prepare_payload();
    beast::error_code ec;
    stream_.expires_after(limits_.write_timeout);
    co_await http::async_write(stream_, res, no_throw(ec));
    if (ec) failed_ = true;
}

HttpResponder::~HttpResponder() {
    if (!watching_) return;
    *watching_ = false;
    beast::error_code ec;
    stream_.socket().cancel(ec);  // ends the pending wait; no read or write is pending once a handler is done
}

void HttpResponder::watch_for_close(std::function<void()> on_gone) {
    watching_ = std::make_shared<bool>(true);
    stream_.socket().async_wait(
        tcp::socket::wait_read, [this, watching = watching_, on_gone = std::move(on_gone)](beast::error_code ec) {
            if (!*watching || ec == asio::error::operation_aborted) return;
            char byte;
            const size_t n = ec ? 0 : stream_.socket().receive(asio::buffer(&byte, 1), tcp::socket::message_peek, ec);
            if (n > 0 && !ec) return;  // the next request's bytes: the client is still there
            failed_ = true;  // end of stream or a reset: nobody reads the answer
            on_gone();
        });
}

std::string HttpResponder::remote_address() const {
    beast::error_code ec;
    const auto endpoint = stream_.socket().remote_endpoint(ec);
    return ec ? std::string() : endpoint.address().to_string();
}

awaitable<bool> HttpResponder::begin_stream(http::status status, std::string content_type) {
    status_ = static_cast<unsigned>(status);
    http::response<http::empty_body> res{status, version_};
    res.set(http::field::content_type, content_type);
    res.set(http::field::cache_control, "no-cache");
    res.keep_alive(keep_alive());
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    beast::error_code ec;
    stream_.expires_after(limits_.write_timeout);
    co_await http::async_write_header(stream_, sr, no_throw(ec));
    if (ec) failed_ = true;
    co_return !failed_;
}

awaitable<bool> HttpResponder::send_chunk(std::string_view data) {
    if (failed_) co_return false;
    beast::error_code ec;
    stream_.expires_after(limits_.write_timeout);
    co_await asio::async_write(stream_, http::make_chunk(asio::buffer(data.data(), data.size())), no_throw(ec));
    if (ec) failed_ = true;
    co_return !failed_;
}

awaitable<bool> HttpResponder::end_stream() {
    if (failed_) co_return false;
    beast::error_code ec;
    stream_.expires_after(limits_.write_timeout);
    co_await asio::async_write(stream_, http::make_chunk_last(), no_throw(ec));
    if (ec) failed_ = true;
    co_return !failed_;
}

// ---- HttpServer -------------------------------------------------------------------

HttpServer::HttpServer(asio::io_context& io, const std::string& host, uint16_t port, HttpLimits limits,
                       Handler handler, Refusal refusal)
    : io_(io), acceptor_(io), limits_(limits), handler_(std::move(handler)), refusal_(std::move(refusal)) {
    const tcp::endpoint endpoint{asio::ip::make_address(host), port};
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
}

void HttpServer::start() { asio::co_spawn(io_, accept_loop(), asio::detached); }

void HttpServer::drain(std::function<void()> on_drained) {
    if (draining_) return;
    draining_ = true;
    on_drained_ = std::move(on_drained);
    beast::error_code ec;
    acceptor_.close(ec);
    if (in_flight_ == 0 && on_drained_) asio::post(io_, std::exchange(on_drained_, nullptr));
}

void HttpServer::request_done() {
    --in_flight_;
    if (draining_ && in_flight_ == 0 && on_drained_) asio::post(io_, std::exchange(on_drained_, nullptr));
}

awaitable<void> HttpServer::accept_loop() {
    while (acceptor_.is_open()) {
        beast::error_code ec;
        tcp::socket socket = co_await acceptor_.async_accept(no_throw(ec));
        if (ec) {
            if (!acceptor_.is_open()) break;
            spdlog::warn("accept: {}", ec.message());
            continue;
        }
        asio::co_spawn(io_, serve_connection(std::move(socket)), asio::detached);
    }
}

awaitable<void> HttpServer::serve_connection(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    bool first = true;
    while (true) {
        http::request_parser<http::string_body> parser;
        parser.header_limit(std::uint32_t(limits_.max_header_bytes));
        parser.body_limit(limits_.max_body_bytes);
        beast::error_code ec;
        // An idle keep-alive connection waits longer for its next request than a new one for its first.
        stream.expires_after(first ? limits_.header_timeout : limits_.idle_timeout);
        co_await http::async_read_header(stream, buffer, parser, no_throw(ec));
        first = false;
        if (ec) {
            // A closed or idle connection ends quietly; a malformed request gets its 400.
            if (ec != http::error::end_of_stream && ec != beast::error::timeout && ec != asio::error::eof &&
                ec != asio::error::connection_reset && ec != asio::error::operation_aborted) {
                http::status status = http::status::bad_request;
                std::string message = "malformed HTTP request: " + ec.message();
                if (ec == http::error::header_limit) {
                    status = http::status::request_header_fields_too_large;
                    message = "the request headers are over the limit of " + std::to_string(limits_.max_header_bytes) + " bytes";
                } else if (ec == http::error::body_limit) {  // Content-Length announced too much
                    status = http::status::payload_too_large;
                    message = "the request body is over the limit of " + std::to_string(limits_.max_body_bytes) + " bytes";
                }
                HttpResponder r(stream, limits_, 11, false);
                HttpResponse refusal = refusal_(status, message, 11);
                co_await r.send(std::move(refusal));
            }
            break;
        }
        const unsigned version = parser.get().version();
        // Refusals that need no body: over the size limit (as soon as the headers say so), or draining.
        const auto length = parser.content_length();
        if (length && *length > limits_.max_body_bytes) {
            HttpResponder r(stream, limits_, version, false);
            HttpResponse refusal = refusal_(http::status::payload_too_large,
                                     "the request body is " + std::to_string(*length) + " bytes, over the limit of " +
                                         std::to_string(limits_.max_body_bytes),
                                     version);
                co_await r.send(std::move(refusal));
            break;
        }
        if (draining_) {
            HttpResponder r(stream, limits_, version, false);
            HttpResponse refusal = refusal_(http::status::service_unavailable, "the server is shutting down", version);
                co_await r.send(std::move(refusal));
            break;
        }
        stream.expires_after(limits_.body_timeout);
        co_await http::async_read(stream, buffer, parser, no_throw(ec));
        if (ec) {
            if (ec == http::error::body_limit) {  // a chunked body that grew past the limit
                HttpResponder r(stream, limits_, version, false);
                HttpResponse refusal = refusal_(http::status::payload_too_large, "the request body is over the limit of " +
                                                                              std::to_string(limits_.max_body_bytes) +
                                                                              " bytes",
                                         version);
                co_await r.send(std::move(refusal));
            } else if (ec != beast::error::timeout && ec != http::error::end_of_stream && ec != asio::error::eof &&
                       ec != asio::error::connection_reset) {
                HttpResponder r(stream, limits_, version, false);
                HttpResponse refusal = refusal_(http::status::bad_request, "malformed HTTP request: " + ec.message(), version);
                co_await r.send(std::move(refusal));
            }
            break;
        }
        const HttpRequest request = parser.release();
        HttpResponder responder(stream, limits_, version, request.keep_alive());
        ++in_flight_;
        try {
            co_await handler_(request, responder);
        } catch (const std::exception& e) {
            spdlog::error("{} {}: {}", std::string(request.method_string()), std::string(request.target()), e.what());
        }
        request_done();
        if (!responder.keep_alive() || draining_) break;
    }
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream.socket().close(ec);
}

}  // namespace minfer
