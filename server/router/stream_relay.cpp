#include "server/router/stream_relay.h"

#include "server/router/openai_error.h"

namespace minfer::router {

// No co_await inside a condition, and no temporary across one: GCC 12
// miscompiles both (an illegal instruction at run time).

namespace {

bool is_event_stream(const std::string& content_type) { return content_type.starts_with("text/event-stream"); }

}  // namespace

asio::awaitable<bool> StreamRelay::send(const UpstreamAnswer& head, std::string_view data) {
    if (!began_) {
        began_ = true;
        const std::string type = head.content_type.empty() ? "application/octet-stream" : head.content_type;
        const bool open = co_await client_.begin_stream(http::status(head.status), type);
        if (!open) co_return false;
    }
    if (data.empty()) co_return true;
    ended_with_done_ = data.ends_with("data: [DONE]\n\n");
    co_return co_await client_.send_chunk(data);
}

asio::awaitable<bool> StreamRelay::relay(const UpstreamAnswer& head, std::string_view piece) {
    if (!is_event_stream(head.content_type)) co_return co_await send(head, piece);
    pending_.append(piece);
    const size_t end = pending_.rfind("\n\n");
    if (end == std::string::npos) co_return true;
    const std::string events = pending_.substr(0, end + 2);
    pending_.erase(0, end + 2);
    co_return co_await send(head, events);
}

asio::awaitable<void> StreamRelay::finish(const UpstreamAnswer& head) {
    const std::string rest = std::move(pending_);
    pending_.clear();
    const bool sent = co_await send(head, rest);
    if (sent) co_await client_.end_stream();
}

asio::awaitable<void> StreamRelay::fail(const std::string& message) {
    pending_.clear();  // half an event: dropped
    if (!ended_with_done_) {
        const std::string events = error_events(http::status::bad_gateway, message);
        const bool sent = co_await client_.send_chunk(events);
        if (!sent) co_return;
    }
    co_await client_.end_stream();
}

}  // namespace minfer::router
