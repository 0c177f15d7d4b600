// The router's own Prometheus text for GET /metrics: its counters, and each
// instance's state as the router sees it (up, requests in flight).
#pragma once

#include <cstdint>
#include <string>

#include "server/router/instance_pool.h"

namespace minfer::router {

struct RouterCounters {
    int64_t requests = 0;  // completion requests received
    int64_t retries = 0;   // flows begun again on other instances after one failed
    int64_t failed = 0;    // requests the router could not serve: no instance left, or a stream broken off
};

std::string render_metrics(const RouterCounters& counters, const InstancePool& pool);

}  // namespace minfer::router
