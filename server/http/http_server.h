// The HTTP/1.1 layer of `minfer serve` (Boost.Beast over Asio, C++20
// coroutines on one I/O thread): keep-alive connections, size limits checked
// on the headers, read and idle timeouts, chunked streaming responses, and a
// graceful drain on SIGINT/SIGTERM. It knows nothing of OpenAI: each complete
// request goes to the Handler.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace minfer {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

struct HttpLimits {
    size_t max_body_bytes = 8u << 20;
    size_t max_header_bytes = 64u << 10;
    std::chrono::seconds header_timeout{30};   // a request's headers must arrive within this
    std::chrono::seconds body_timeout{60};     // and its body within this
    std::chrono::seconds idle_timeout{60};     // a keep-alive connection with no request is closed after this
    std::chrono::seconds write_timeout{60};    // a client that reads nothing for this long is dropped
};

// One connection's way to answer: a whole response, or a chunked stream.
class HttpResponder {
public:
    HttpResponder(beast::tcp_stream& stream, const HttpLimits& limits, unsigned version, bool keep_alive)
        : stream_(stream), limits_(limits), version_(version), keep_alive_(keep_alive) {}
    ~HttpResponder();
    HttpResponder(const HttpResponder&) = delete;
    HttpResponder& operator=(const HttpResponder&) = delete;

    // While the answer is being made (a long generation, a prefill before the
    // first chunk), watches the connection: on_gone runs once on the I/O thread
    // if the client closes it before this responder is done. A client that
    // sends its next request early (pipelining) is taken as present.
    void watch_for_close(std::function<void()> on_gone);

    asio::awaitable<void> send(HttpResponse res);
    // Streaming: the header (chunked), then chunks; each returns false once
    // the client is gone (the caller then stops and cleans up).
    asio::awaitable<bool> begin_stream(http::status status, std::string content_type);
    asio::awaitable<bool> send_chunk(std::string_view data);
    asio::awaitable<bool> end_stream();

    bool keep_alive() const { return keep_alive_ && !failed_; }
    unsigned version() const { return version_; }
    // The status of the answer sent (or begun), 0 before any; and whether the client went away.
    unsigned status() const { return status_; }
    bool failed() const { return failed_; }
    // The peer's IP address ("" once the connection is gone), for per-client
    // limits and the access log (off unless asked for).
    std::string remote_address() const;

private:
    beast::tcp_stream& stream_;
    const HttpLimits& limits_;
    unsigned version_;
    bool keep_alive_;
    bool failed_ = false;
    unsigned status_ = 0;
    std::shared_ptr<bool> watching_;  // cleared when the responder is done: a late wake-up then does nothing
};

using Handler = std::function<asio::awaitable<void>(const HttpRequest&, HttpResponder&)>;
// Answers a request refused before its body is read (over the size limit, or
// while draining): status and message.
using Refusal = std::function<HttpResponse(http::status, const std::string&, unsigned version)>;

class HttpServer {
public:
    HttpServer(asio::io_context& io, const std::string& host, uint16_t port, HttpLimits limits, Handler handler,
               Refusal refusal);
    uint16_t port() const { return port_; }  // the bound port (port 0 picks one)

    // Accepts until drain() is called: then the listener closes, new requests on
    // open connections get 503, and on_drained runs once no request is in flight.
    void start();
    void drain(std::function<void()> on_drained);
    bool draining() const { return draining_; }
    int64_t in_flight() const { return in_flight_; }

private:
    asio::awaitable<void> accept_loop();
    asio::awaitable<void> serve_connection(asio::ip::tcp::socket socket);
    void request_done();

    asio::io_context& io_;
    asio::ip::tcp::acceptor acceptor_;
    uint16_t port_ = 0;
    HttpLimits limits_;
    Handler handler_;
    Refusal refusal_;
    bool draining_ = false;
    int64_t in_flight_ = 0;
    std::function<void()> on_drained_;
};

}  // namespace minfer
