// `minfer router`: an OpenAI-compatible front for prefill/decode
// disaggregation (SGLang's router, vLLM's disaggregated proxy). Clients talk
// to it as to `minfer serve`; each completion request is run by a prefill
// instance and a decode instance (disaggregated_completion.h). One Asio
// thread of coroutines, like the server it fronts.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/http/http_server.h"
#include "server/router/disaggregated_completion.h"
#include "server/router/instance_pool.h"
#include "server/router/router_metrics.h"

namespace minfer::router {

struct RouterConfig {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;
    std::vector<std::string> prefill_urls, decode_urls;  // http://HOST:PORT[/PATH], checked by bench::parse_url
    Policy policy = Policy::round_robin;
    std::string api_key;  // clients must send it on /v1 routes; it also goes to the instances
    std::chrono::milliseconds health_interval{2000};
    std::chrono::seconds request_timeout{600};  // for each upstream request, streams included
    HttpLimits http;
};

class RouterServer {
public:
    explicit RouterServer(RouterConfig config);  // binds the port (throws boost::system::system_error)
    uint16_t port() const { return http_->port(); }

    // Checks every instance once, calls on_ready (the port is known before,
    // the instances' states only now), then serves until SIGINT/SIGTERM, which
    // let the requests in flight finish.
    void run(std::function<void()> on_ready);

private:
    asio::awaitable<void> start(std::function<void()> on_ready);
    asio::awaitable<void> handle(const HttpRequest& req, HttpResponder& res);
    asio::awaitable<void> models(const HttpRequest& req, HttpResponder& res);
    HttpResponse health(unsigned version) const;

    // The io_context is declared first, so it is destroyed last: coroutines it
    // still holds at exit may refer to everything below.
    asio::io_context io_;
    RouterConfig config_;
    InstancePool pool_;
    RouterCounters counters_;
    FlowContext flow_;
    std::unique_ptr<HttpServer> http_;
};

}  // namespace minfer::router
