#include "server/router/instance_pool.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/verb.hpp>

#include "server/router/kv_transfer.h"

namespace minfer::router {

namespace asio = boost::asio;
using asio::use_awaitable;
using boost::beast::http::verb;

const char* role_name(Role role) { return role == Role::prefill ? "prefill" : "decode"; }

InstancePool::InstancePool(asio::io_context& io, const std::vector<std::string>& prefill_urls,
                           const std::vector<std::string>& decode_urls, const std::string& api_key, Policy policy,
                           std::chrono::steady_clock::duration health_timeout)
    : io_(io), policy_(policy), health_timeout_(health_timeout) {
    auto add = [&](Role role, const std::string& url) {
        auto instance = std::make_shared<Instance>();
        instance->role = role;
        instance->url = url;
        instance->client = std::make_unique<UpstreamClient>(io, bench::parse_url(url), api_key);
        all_.push_back(instance);
        by_role_[int(role)].push_back(instance);
    };
    for (const std::string& url : prefill_urls) add(Role::prefill, url);
    for (const std::string& url : decode_urls) add(Role::decode, url);
}

std::shared_ptr<Instance> InstancePool::pick(Role role, const std::vector<std::shared_ptr<Instance>>& tried) {
    const auto& list = by_role_[int(role)];
    size_t& next = next_[int(role)];
    std::shared_ptr<Instance> best;
    size_t best_k = 0;
    // From round-robin's place on, so that least-loaded's ties rotate too.
    for (size_t k = 0; k < list.size(); ++k) {
        const auto& candidate = list[(next + k) % list.size()];
        if (!candidate->up || std::find(tried.begin(), tried.end(), candidate) != tried.end()) continue;
        if (!best || candidate->in_flight < best->in_flight) {
            best = candidate;
            best_k = k;
        }
        if (policy_ == Policy::round_robin) break;
    }
    if (best) next = (next + best_k + 1) % list.size();
    return best;
}

void InstancePool::mark_down(Instance& instance, const std::string& why) {
    if (instance.up || instance.down_reason != why)
        spdlog::warn("{} {} is down: {}", role_name(instance.role), instance.url, why);
    instance.up = false;
    instance.down_reason = why;
    instance.client->forget_idle();
}

void InstancePool::mark_up(Instance& instance) {
    instance.up = true;
    instance.down_reason.clear();
    if (instance.role == Role::decode)
        spdlog::info("decode {} is up (receives KV at {})", instance.url, instance.kv_address);
    else
        spdlog::info("prefill {} is up", instance.url);
}

asio::awaitable<void> InstancePool::check(std::shared_ptr<Instance> instance) {
    Instance& i = *instance;
    const UpstreamAnswer health = co_await i.client->request(verb::get, "/health", "", health_timeout_);
    if (!health.ok() || health.status != 200) {
        mark_down(i, health.ok() ? fmt::format("GET /health answered HTTP {}", health.status) : health.error);
        co_return;
    }
    if (i.up) co_return;
    // Back (or up for the first time): a decode instance's KV address may
    // have changed with its restart, so it is asked again.
    if (i.role == Role::decode) {
        const UpstreamAnswer kv = co_await i.client->request(verb::get, "/v1/kv_transfer", "", health_timeout_);
        if (!kv.ok() || kv.status != 200) {
            mark_down(i, kv.ok() ? fmt::format("GET /v1/kv_transfer answered HTTP {}: it cannot receive KV "
                                                "(is it a minfer serve with the decode role?)",
                                                kv.status)
                                 : kv.error);
            co_return;
        }
        try {
            i.kv_address = decode_address_from(kv.body, i.client->url().host);
        } catch (const std::exception& e) {
            mark_down(i, std::string(e.what()) + ": it cannot receive KV");
            co_return;
        }
    }
    mark_up(i);
}

asio::awaitable<void> InstancePool::check_and_count(std::shared_ptr<Instance> instance, std::shared_ptr<size_t> pending,
                                                    std::shared_ptr<asio::steady_timer> all_done) {
    co_await check(std::move(instance));
    if (--*pending == 0) all_done->cancel();
}

asio::awaitable<void> InstancePool::check_all() {
    auto pending = std::make_shared<size_t>(all_.size());
    auto all_done = std::make_shared<asio::steady_timer>(io_, asio::steady_timer::time_point::max());
    for (const auto& instance : all_) asio::co_spawn(io_, check_and_count(instance, pending, all_done), asio::detached);
    // The checks start only once this coroutine waits (co_spawn posts them),
    // so the last one's cancel always finds the wait in place.
    boost::system::error_code ec;
    if (*pending > 0) co_await all_done->async_wait(asio::redirect_error(use_awaitable, ec));
}

asio::awaitable<void> InstancePool::check_every(std::chrono::steady_clock::duration interval) {
    asio::steady_timer timer(io_);
    while (true) {
        timer.expires_after(interval);
        co_await check_all();
        boost::system::error_code ec;
        co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    }
}

size_t InstancePool::up_count(Role role) const {
    const auto& list = by_role_[int(role)];
    return size_t(std::count_if(list.begin(), list.end(), [](const auto& i) { return i->up; }));
}

}  // namespace minfer::router
