// The router's HTTP/1.1 client for one instance. bench::HttpClient hands a
// streamed body to a plain callback; a proxy must instead wait for the client
// to take each piece before reading the next (so a slow reader slows the
// instance down rather than piling bytes up in the router), must see the
// answer's Content-Type, and must be able to drop the exchange at once when
// its own client leaves. Connections are kept alive and reused.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/bench/http_stream_client.h"

namespace minfer::router {

// Cuts one client request's upstream exchanges short: fire() closes the
// connection in use, so the instance sees its client go (and frees the
// request's KV), and the pending read or write ends at once. I/O thread only.
struct UpstreamAbort {
    bool fired = false;
    boost::beast::tcp_stream* active = nullptr;  // the connection of the exchange under way, if any

    void fire();
};

struct UpstreamAnswer {
    int status = 0;            // 0 when no answer came
    std::string error;         // why the exchange failed ("" when it ended well), even after the status came
    std::string content_type;
    std::string body;          // the whole body, unless it went to the sink
    bool abandoned = false;    // ended by UpstreamAbort or a sink that returned false

    bool ok() const { return status != 0 && error.empty(); }
};

// Takes each piece of a 200 answer's body as it arrives; returns false to
// abandon the exchange (its own client is gone).
using BodySink = std::function<boost::asio::awaitable<bool>(const UpstreamAnswer& head, std::string_view piece)>;

class UpstreamClient {
public:
    UpstreamClient(boost::asio::io_context& io, bench::Url url, std::string api_key);

    // One request; the exchange must end within `timeout`. Never throws.
    boost::asio::awaitable<UpstreamAnswer> request(boost::beast::http::verb method, std::string target,
                                                   std::string body, std::chrono::steady_clock::duration timeout,
                                                   UpstreamAbort* abort = nullptr, BodySink sink = {});
    const bench::Url& url() const { return url_; }
    // Closes the kept-alive connections (the instance went down: they are dead too).
    void forget_idle() { idle_.clear(); }

private:
    boost::asio::io_context& io_;
    bench::Url url_;
    std::string api_key_;
    boost::asio::ip::tcp::resolver::results_type endpoints_;  // resolved at the first connect
    std::vector<std::unique_ptr<boost::beast::tcp_stream>> idle_;
};

}  // namespace minfer::router
