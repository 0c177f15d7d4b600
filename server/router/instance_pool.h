// The instances the router sends work to: which are up, how many of the
// router's requests each has in flight, the decode instances' KV addresses,
// the choice of one for a request (round-robin or least-loaded), and the
// health checks that take instances out and bring them back.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/router/upstream_client.h"

namespace minfer::router {

enum class Role { prefill, decode };
const char* role_name(Role role);

enum class Policy { round_robin, least_loaded };

struct Instance {
    Role role = Role::prefill;
    std::string url;  // as given on the command line: logs and metric labels
    std::unique_ptr<UpstreamClient> client;
    bool up = false;  // until its first health check says so
    int64_t in_flight = 0;
    std::string kv_address;   // decode: where prefill instances send its KV (GET /v1/kv_transfer)
    std::string down_reason;  // the last reason logged, so a lasting failure is logged once
};

// Counts a request in flight on an instance for as long as it lives. It
// holds the instance (shared), so a request's coroutine destroyed at shutdown
// still finds it.
class InFlight {
public:
    explicit InFlight(std::shared_ptr<Instance> instance) : instance_(std::move(instance)) { ++instance_->in_flight; }
    ~InFlight() { --instance_->in_flight; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

private:
    std::shared_ptr<Instance> instance_;
};

class InstancePool {
public:
    InstancePool(boost::asio::io_context& io, const std::vector<std::string>& prefill_urls,
                 const std::vector<std::string>& decode_urls, const std::string& api_key, Policy policy,
                 std::chrono::steady_clock::duration health_timeout);

    // An instance of `role` that is up and not in `tried`, by the policy; null if none.
    std::shared_ptr<Instance> pick(Role role, const std::vector<std::shared_ptr<Instance>>& tried);
    // A request to it failed: out until a health check finds it well.
    void mark_down(Instance& instance, const std::string& why);

    // GET /health on every instance at once, back when all have answered.
    // A down instance that answers 200 is up again (a decode instance once
    // it also gives a usable KV address); one that does not is down.
    boost::asio::awaitable<void> check_all();
    // check_all every `interval`, forever.
    boost::asio::awaitable<void> check_every(std::chrono::steady_clock::duration interval);

    size_t up_count(Role role) const;
    const std::vector<std::shared_ptr<Instance>>& instances() const { return all_; }

private:
    boost::asio::awaitable<void> check(std::shared_ptr<Instance> instance);
    boost::asio::awaitable<void> check_and_count(std::shared_ptr<Instance> instance, std::shared_ptr<size_t> pending,
                                                 std::shared_ptr<boost::asio::steady_timer> all_done);
    void mark_up(Instance& instance);

    boost::asio::io_context& io_;
    Policy policy_;
    std::chrono::steady_clock::duration health_timeout_;
    std::vector<std::shared_ptr<Instance>> all_;  // prefill first, then decode, as given
    std::vector<std::shared_ptr<Instance>> by_role_[2];
    size_t next_[2] = {0, 0};  // round-robin's place, per role
};

}  // namespace minfer::router
