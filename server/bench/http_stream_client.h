// A small HTTP/1.1 client on Boost.Beast for the load generator: one
// io_context, one coroutine per request, so thousands of requests in flight
// need no thread each. Connections are kept alive and reused (a pool of idle
// ones), and a response body is handed over piece by piece as it arrives, for
// streamed (SSE) answers.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::bench {

// http://HOST[:PORT][/PATH]; the path is a prefix for every request target.
// https is not supported (a one-line std::invalid_argument says so).
struct Url {
    std::string host;
    std::string port = "80";
    std::string path;  // without a trailing '/', "" for the root
};
Url parse_url(const std::string& text);

struct HttpResult {
    int status = 0;     // 0 when no response came (connect refused, timeout, reset)
    std::string error;  // what went wrong, for status 0
    std::string body;   // the whole body, unless it was streamed to on_body
};

class HttpClient {
public:
    HttpClient(boost::asio::io_context& io, Url url, std::string api_key);

    // Sends one request and reads the answer. With on_body, the bytes of a 200
    // answer go to it as they arrive (it may throw to abandon the request: the
    // message becomes HttpResult::error); other answers are collected in body.
    // The whole exchange must end within `timeout`. Never throws.
    boost::asio::awaitable<HttpResult> request(std::string method, std::string target, std::string body,
                                               std::chrono::steady_clock::duration timeout,
                                               std::function<void(std::string_view)> on_body = {});

    const Url& url() const { return url_; }

private:
    boost::asio::awaitable<std::unique_ptr<boost::beast::tcp_stream>> connect(
        std::chrono::steady_clock::time_point deadline);

    boost::asio::io_context& io_;
    Url url_;
    std::string api_key_;
    boost::asio::ip::tcp::resolver::results_type endpoints_;  // resolved once
    std::vector<std::unique_ptr<boost::beast::tcp_stream>> idle_;  // kept-alive connections
};

// A blocking GET (for /v1/models before the run), on its own io_context.
HttpResult http_get(const Url& url, const std::string& api_key, const std::string& target,
                    std::chrono::steady_clock::duration timeout);

}  // namespace minfer::bench
