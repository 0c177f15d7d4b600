#include "server/router/disaggregated_completion.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <memory>
#include <vector>

#include "server/router/kv_transfer.h"
#include "server/router/openai_error.h"
#include "server/router/stream_relay.h"

namespace minfer::router {

// Responses, bodies and messages are named before they are co_awaited (as in
// openai_server.cpp): GCC 12 mishandles temporaries that live across a suspension.

namespace json = boost::json;
using boost::beast::http::verb;
using Instances = std::vector<std::shared_ptr<Instance>>;

namespace {

// How a decode instance's part ended.
enum class DecodeEnd {
    answered,        // the client has the whole answer (a 4xx included)
    client_gone,     // the client left; the instance saw its connection close
    failed_early,    // the instance failed before the client saw a byte: another may take it
    failed_midway,   // the instance broke off mid-stream; the stream was ended with an error event
};

// A whole upstream answer, sent to the client as it came.
HttpResponse as_is(const UpstreamAnswer& answer, unsigned version) {
    HttpResponse res{http::status(answer.status), version};
    if (!answer.content_type.empty()) res.set(http::field::content_type, answer.content_type);
    res.body() = answer.body;
    return res;
}

std::string describe(const UpstreamAnswer& answer) {
    if (!answer.error.empty()) return answer.error;
    const std::string message = error_message_of(answer.body);
    return fmt::format("HTTP {}{}{}", answer.status, message.empty() ? "" : ": ", message);
}

asio::awaitable<DecodeEnd> run_decode(FlowContext& router, const std::shared_ptr<Instance>& decode,
                                      const std::string& path, std::string body, bool stream, HttpResponder& res,
                                      UpstreamAbort& abort, std::string& why) {
    StreamRelay relay(res);
    BodySink sink;
    if (stream) sink = [&relay](const UpstreamAnswer& head, std::string_view piece) { return relay.relay(head, piece); };
    UpstreamAnswer answer;
    {
        InFlight counted(decode);
        answer = co_await decode->client->request(verb::post, path, std::move(body), router.request_timeout, &abort,
                                                  std::move(sink));
    }
    if (answer.abandoned) co_return DecodeEnd::client_gone;
    if (!answer.ok() || answer.status >= 500) {
        why = describe(answer);
        if (!relay.began()) co_return DecodeEnd::failed_early;
        const std::string message = fmt::format("the decode instance broke off: {}", why);
        co_await relay.fail(message);
        co_return DecodeEnd::failed_midway;
    }
    if (stream && answer.status == 200) {
        co_await relay.finish(answer);
    } else {
        HttpResponse reply = as_is(answer, res.version());
        co_await res.send(std::move(reply));
    }
    co_return DecodeEnd::answered;
}

}  // namespace

asio::awaitable<void> serve_disaggregated(FlowContext& router, const HttpRequest& req, HttpResponder& res,
                                          std::string path) {
    const unsigned v = req.version();
    ++router.counters.requests;
    boost::system::error_code ec;
    const json::value parsed = json::parse(req.body(), ec);
    if (ec || !parsed.is_object()) {
        HttpResponse reply = error_response(http::status::bad_request,
                                            ec ? "the request body is not valid JSON: " + ec.message()
                                               : "the request body must be a JSON object",
                                            v);
        co_await res.send(std::move(reply));
        co_return;
    }
    const json::object& client_body = parsed.as_object();
    const json::value* stream_field = client_body.if_contains("stream");
    const bool stream = stream_field && stream_field->is_bool() && stream_field->as_bool();

    // The client leaving closes whichever upstream connection is in use, so
    // that instance aborts the request and frees its KV.
    auto abort = std::make_shared<UpstreamAbort>();
    res.watch_for_close([abort] { abort->fire(); });

    Instances tried_prefill, tried_decode;
    std::shared_ptr<Instance> decode;
    for (int attempt = 0;; ++attempt) {
        if (!decode) decode = router.pool.pick(Role::decode, tried_decode);
        const std::shared_ptr<Instance> prefill = decode ? router.pool.pick(Role::prefill, tried_prefill) : nullptr;
        if (!decode || !prefill) {
            const Role missing = decode ? Role::prefill : Role::decode;
            ++router.counters.failed;
            const std::string message =
                attempt == 0 ? fmt::format("no {} instance is up", role_name(missing))
                             : fmt::format("the request failed on every {} instance that was up ({} attempts)",
                                           role_name(missing), attempt);
            HttpResponse reply = error_response(http::status::service_unavailable, message, v);
            reply.set(http::field::retry_after, "1");
            co_await res.send(std::move(reply));
            co_return;
        }
        if (attempt > 0) ++router.counters.retries;

        // 1. The prompt's KV, computed on the prefill instance and delivered to the decode instance.
        const std::string transfer_id = new_transfer_id();
        UpstreamAnswer prefilled;
        {
            InFlight counted(prefill);
            std::string body = json::serialize(prefill_body(client_body, decode->kv_address, transfer_id));
            prefilled = co_await prefill->client->request(verb::post, path, std::move(body), router.request_timeout,
                                                          abort.get());
        }
        if (prefilled.abandoned) co_return;
        if (is_kv_transfer_error(prefilled.status, prefilled.body)) {
            router.pool.mark_down(*decode, fmt::format("prefill {} could not send it KV: {}", prefill->url,
                                                       describe(prefilled)));
            tried_decode.push_back(std::exchange(decode, nullptr));
            continue;
        }
        if (!prefilled.ok() || prefilled.status >= 500) {
            router.pool.mark_down(*prefill, describe(prefilled));
            tried_prefill.push_back(prefill);
            continue;
        }
        if (prefilled.status != 200) {  // the request's own fault (4xx): the client's answer
            HttpResponse reply = as_is(prefilled, v);
            co_await res.send(std::move(reply));
            co_return;
        }

        // 2. The answer, generated by the decode instance from that KV.
        std::string why;
        std::string body = json::serialize(decode_body(client_body, transfer_id));
        const DecodeEnd end = co_await run_decode(router, decode, path, std::move(body), stream, res, *abort, why);
        if (end == DecodeEnd::answered || end == DecodeEnd::client_gone) co_return;
        router.pool.mark_down(*decode, why);
        if (end == DecodeEnd::failed_midway) {  // tokens went out: a retry would repeat them
            ++router.counters.failed;
            co_return;
        }
        tried_decode.push_back(std::exchange(decode, nullptr));
    }
}

}  // namespace minfer::router
