#include "server/router/router_metrics.h"

#include <fmt/format.h>

namespace minfer::router {

namespace {

// A label value as Prometheus' text format escapes it.
std::string label_value(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

void counter(std::string& out, const char* name, const char* help, int64_t value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, value);
}

}  // namespace

std::string render_metrics(const RouterCounters& counters, const InstancePool& pool) {
    std::string out;
    counter(out, "minfer:router_requests_total", "Completion requests received.", counters.requests);
    counter(out, "minfer:router_retries_total", "Requests begun again on other instances after one failed.",
            counters.retries);
    counter(out, "minfer:router_failed_requests_total",
            "Requests the router could not serve: no instance up, or a stream that broke off.", counters.failed);
    auto gauge = [&](const char* name, const char* help, auto value_of) {
        out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n", name, help);
        for (const auto& i : pool.instances())
            out += fmt::format("{}{{role=\"{}\",url=\"{}\"}} {}\n", name, role_name(i->role), label_value(i->url),
                               value_of(*i));
    };
    gauge("minfer:router_instance_up", "1 while the instance takes requests, 0 while it is down.",
          [](const Instance& i) { return i.up ? 1 : 0; });
    gauge("minfer:router_in_flight", "The router's requests in flight on the instance.",
          [](const Instance& i) { return i.in_flight; });
    return out;
}

}  // namespace minfer::router
