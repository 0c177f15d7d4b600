// One client request to /v1/completions or /v1/chat/completions, served by two
// instances: a prefill instance computes the prompt's KV and sends it to a
// decode instance, which generates the answer the client gets (streamed as it
// comes). An instance that fails before the client has seen a byte is taken
// out and the whole flow begins again on others, at most once per instance.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "server/http/http_server.h"
#include "server/router/instance_pool.h"
#include "server/router/router_metrics.h"

namespace minfer::router {

// What a request's flow needs of the router.
struct FlowContext {
    InstancePool& pool;
    RouterCounters& counters;
    std::chrono::steady_clock::duration request_timeout;  // for each upstream request
};

// `path` is the request's path, the same on the instances.
asio::awaitable<void> serve_disaggregated(FlowContext& router, const HttpRequest& req, HttpResponder& res,
                                          std::string path);

}  // namespace minfer::router
