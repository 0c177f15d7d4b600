// Passes a decode instance's streamed (SSE) answer on to the client as it
// arrives. Only whole events go out, so an instance that dies mid-event
// leaves the client a well-formed stream, which the router then ends with an
// error event and [DONE]. Nothing goes to the client before the first event:
// until then the instance can fail and the request go to another one
// unseen.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>

#include "server/http/http_server.h"
#include "server/router/upstream_client.h"

namespace minfer::router {

class StreamRelay {
public:
    explicit StreamRelay(HttpResponder& client) : client_(client) {}

    // A BodySink: false once the client is gone.
    asio::awaitable<bool> relay(const UpstreamAnswer& head, std::string_view piece);
    // The instance's answer ended well: the rest, then the stream's end.
    asio::awaitable<void> finish(const UpstreamAnswer& head);
    // The instance broke off after the stream began: an error event and [DONE].
    asio::awaitable<void> fail(const std::string& message);

    // Whether bytes went to the client (after that, a retry would repeat tokens).
    bool began() const { return began_; }

private:
    asio::awaitable<bool> send(const UpstreamAnswer& head, std::string_view data);

    HttpResponder& client_;
    bool began_ = false;
    bool ended_with_done_ = false;  // the instance's own [DONE] went out
    std::string pending_;           // bytes of an event not yet whole
};

}  // namespace minfer::router
