#include "server/router/router_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/json.hpp>
#include <csignal>

#include "server/router/openai_error.h"

namespace minfer::router {

// Responses are named before they are co_awaited (as in openai_server.cpp):
// GCC 12 mishandles temporaries that live across a suspension.

namespace json = boost::json;
using boost::beast::http::verb;

namespace {

std::string_view path_of(const HttpRequest& req) {
    std::string_view t(req.target().data(), req.target().size());
    return t.substr(0, t.find('?'));
}

// A health check waits at most this long: long enough for a busy instance,
// short enough that a black-holed one does not hold up the next round for long.
std::chrono::steady_clock::duration health_timeout(std::chrono::milliseconds interval) {
    return std::clamp<std::chrono::steady_clock::duration>(interval, std::chrono::seconds(1), std::chrono::seconds(5));
}

}  // namespace

RouterServer::RouterServer(RouterConfig config)
    : config_(std::move(config)),
      pool_(io_, config_.prefill_urls, config_.decode_urls, config_.api_key, config_.policy,
            health_timeout(config_.health_interval)),
      flow_{pool_, counters_, config_.request_timeout} {
    http_ = std::make_unique<HttpServer>(
        io_, config_.host, config_.port, config_.http,
        [this](const HttpRequest& req, HttpResponder& res) { return handle(req, res); },
        [](http::status status, const std::string& message, unsigned version) {
            return error_response(status, message, version);
        });
}

void RouterServer::run(std::function<void()> on_ready) {
    asio::signal_set signals(io_, SIGINT, SIGTERM);
    signals.async_wait([this](const boost::system::error_code& ec, int signal) {
        if (ec) return;
        spdlog::info("signal {}: finishing {} request(s) in flight, then exiting", signal, http_->in_flight());
        http_->drain([this] { io_.stop(); });
    });
    asio::co_spawn(io_, start(std::move(on_ready)), asio::detached);
    io_.run();
}

asio::awaitable<void> RouterServer::start(std::function<void()> on_ready) {
    co_await pool_.check_all();
    spdlog::info("routing on http://{}:{}: {} of {} prefill and {} of {} decode instance(s) up ({} policy)",
                 config_.host, port(), pool_.up_count(Role::prefill), config_.prefill_urls.size(),
                 pool_.up_count(Role::decode), config_.decode_urls.size(),
                 config_.policy == Policy::round_robin ? "round-robin" : "least-loaded");
    on_ready();
    http_->start();
    co_await pool_.check_every(config_.health_interval);
}

asio::awaitable<void> RouterServer::handle(const HttpRequest& req, HttpResponder& res) {
    const std::string path(path_of(req));
    const unsigned v = req.version();
    const bool get = req.method() == verb::get, post = req.method() == verb::post;
    if (path.starts_with("/v1/") && !config_.api_key.empty()) {
        const auto auth = req[http::field::authorization];
        if (std::string_view(auth.data(), auth.size()) != "Bearer " + config_.api_key) {
            HttpResponse reply = error_response(http::status::unauthorized,
                                                "a valid API key is required (Authorization: Bearer ...)", v);
            co_await res.send(std::move(reply));
            co_return;
        }
    }
    const bool completions = path == "/v1/completions" || path == "/v1/chat/completions";
    const bool known = completions || path == "/v1/models" || path == "/health" || path == "/metrics";
    if (!known) {
        HttpResponse reply = error_response(http::status::not_found, fmt::format("no route {}", path), v);
        co_await res.send(std::move(reply));
    } else if (completions ? !post : !get) {
        HttpResponse reply = error_response(http::status::method_not_allowed,
                                            fmt::format("{} does not take {}", path, std::string(req.method_string())), v);
        co_await res.send(std::move(reply));
    } else if (completions) {
        co_await serve_disaggregated(flow_, req, res, path);
    } else if (path == "/v1/models") {
        co_await models(req, res);
    } else if (path == "/health") {
        HttpResponse reply = health(v);
        co_await res.send(std::move(reply));
    } else {
        HttpResponse reply{http::status::ok, v};
        reply.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        reply.body() = render_metrics(counters_, pool_);
        co_await res.send(std::move(reply));
    }
}

// The decode instances serve the model the clients name: any that is up answers.
asio::awaitable<void> RouterServer::models(const HttpRequest& req, HttpResponder& res) {
    std::vector<std::shared_ptr<Instance>> tried;
    while (const auto decode = pool_.pick(Role::decode, tried)) {
        tried.push_back(decode);
        const UpstreamAnswer answer =
            co_await decode->client->request(verb::get, "/v1/models", "", config_.request_timeout);
        if (!answer.ok() || answer.status >= 500) {
            pool_.mark_down(*decode, answer.ok() ? fmt::format("GET /v1/models answered HTTP {}", answer.status)
                                                 : answer.error);
            continue;
        }
        HttpResponse reply{http::status(answer.status), req.version()};
        if (!answer.content_type.empty()) reply.set(http::field::content_type, answer.content_type);
        reply.body() = answer.body;
        co_await res.send(std::move(reply));
        co_return;
    }
    HttpResponse reply = error_response(http::status::service_unavailable, "no decode instance is up", req.version());
    co_await res.send(std::move(reply));
}

HttpResponse RouterServer::health(unsigned version) const {
    const size_t prefill = pool_.up_count(Role::prefill), decode = pool_.up_count(Role::decode);
    if (prefill == 0 || decode == 0)
        return error_response(http::status::service_unavailable,
                              fmt::format("{} prefill and {} decode instance(s) up: each role needs one", prefill,
                                          decode),
                              version);
    HttpResponse res{http::status::ok, version};
    res.set(http::field::content_type, "application/json");
    res.body() = json::serialize(json::object{{"status", "ok"},
                                              {"prefill_up", prefill},
                                              {"decode_up", decode}});
    return res;
}

}  // namespace minfer::router
