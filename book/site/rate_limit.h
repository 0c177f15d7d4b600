// A token bucket per client address for the book's /api: each bucket holds
// up to `burst` requests and refills at `requests_per_minute`. A request
// takes one token or is refused with the time until one has refilled. The
// answer is also spelled as the IETF httpapi RateLimit-Policy and RateLimit
// fields (draft-ietf-httpapi-ratelimit-headers, structured-field form).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace minfer::book {

class RateLimiter {
public:
    using TimePoint = std::chrono::steady_clock::time_point;
    // Monotonic time; the unit test passes a clock it moves by hand.
    using Clock = std::function<TimePoint()>;

    struct Decision {
        bool allowed = false;
        long remaining = 0;    // whole requests left in the bucket after this one
        long reset_s = 0;      // seconds until the bucket is full again
        long retry_after_s = 0;  // when refused: seconds until one request has refilled
    };

    // Throws std::invalid_argument unless requests_per_minute > 0 and burst >= 1.
    // max_clients bounds the table even under a flood of distinct addresses.
    RateLimiter(double requests_per_minute, double burst, Clock clock = {}, size_t max_clients = 1 << 16);

    Decision take(const std::string& client);

    // RateLimit-Policy: "burst";q=BURST;w=SECONDS (w: the time an empty bucket takes to fill).
    std::string policy_field() const;
    // RateLimit: "burst";r=REMAINING;t=SECONDS.
    static std::string state_field(const Decision& d);

    size_t tracked_clients() const;

private:
    struct Bucket {
        double tokens;
        TimePoint updated;
    };
    double seconds(TimePoint from, TimePoint to) const;
    void refill(Bucket& b, TimePoint now) const;
    void forget_full(TimePoint now);
    void evict_oldest();

    double rate_per_s_, burst_;
    Clock clock_;
    size_t max_clients_;
    mutable std::mutex mutex_;
    std::unordered_map<std::string, Bucket> buckets_;
    TimePoint last_sweep_;
};

}  // namespace minfer::book
