#include "book/site/rate_limit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace minfer::book {

namespace {

// Whole seconds, rounded up, with a little slack for floating-point noise
// (29.999999999 tokens after an exact refill must not read as one second to go).
long ceil_seconds(double s) { return std::max(0L, static_cast<long>(std::ceil(s - 1e-9))); }

}  // namespace

RateLimiter::RateLimiter(double requests_per_minute, double burst, Clock clock, size_t max_clients)
    : rate_per_s_(requests_per_minute / 60.0), burst_(std::floor(burst)), clock_(std::move(clock)),
      max_clients_(std::max<size_t>(max_clients, 1)) {
    if (!(requests_per_minute > 0) || !(burst >= 1))
        throw std::invalid_argument("rate limit: the rate must be above 0 and the burst at least 1");
    if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
    last_sweep_ = clock_();
}

double RateLimiter::seconds(TimePoint from, TimePoint to) const {
    return std::chrono::duration<double>(to - from).count();
}

void RateLimiter::refill(Bucket& b, TimePoint now) const {
    b.tokens = std::min(burst_, b.tokens + std::max(0.0, seconds(b.updated, now)) * rate_per_s_);
    b.updated = now;
}

// A bucket that has refilled completely is the same as no bucket: drop it.
void RateLimiter::forget_full(TimePoint now) {
    last_sweep_ = now;
    for (auto it = buckets_.begin(); it != buckets_.end();) {
        refill(it->second, now);
        it = it->second.tokens >= burst_ ? buckets_.erase(it) : std::next(it);
    }
}

void RateLimiter::evict_oldest() {
    auto oldest = std::min_element(buckets_.begin(), buckets_.end(),
                                   [](const auto& a, const auto& b) { return a.second.updated < b.second.updated; });
    if (oldest != buckets_.end()) buckets_.erase(oldest);
}

RateLimiter::Decision RateLimiter::take(const std::string& client) {
    std::lock_guard lock(mutex_);
    const TimePoint now = clock_();
    // Sweeping once per fill time keeps only the addresses seen within the
    // last fill time; the cap holds even against a flood of new addresses.
    if (seconds(last_sweep_, now) >= burst_ / rate_per_s_) forget_full(now);
    auto it = buckets_.find(client);
    if (it == buckets_.end()) {
        if (buckets_.size() >= max_clients_) forget_full(now);
        if (buckets_.size() >= max_clients_) evict_oldest();
        it = buckets_.emplace(client, Bucket{burst_, now}).first;
    }
    Bucket& b = it->second;
    refill(b, now);
    Decision d;
    d.allowed = b.tokens + 1e-9 >= 1;  // slack: a refill in steps must add up to a whole token
    if (d.allowed) b.tokens = std::max(0.0, b.tokens - 1);
    else d.retry_after_s = std::max(1L, ceil_seconds((1 - b.tokens) / rate_per_s_));
    d.remaining = static_cast<long>(std::floor(b.tokens + 1e-9));
    d.reset_s = ceil_seconds((burst_ - b.tokens) / rate_per_s_);
    return d;
}

std::string RateLimiter::policy_field() const {
    return "\"burst\";q=" + std::to_string(static_cast<long>(burst_)) + ";w=" +
           std::to_string(std::max(1L, ceil_seconds(burst_ / rate_per_s_)));
}

std::string RateLimiter::state_field(const Decision& d) {
    return "\"burst\";r=" + std::to_string(d.remaining) + ";t=" + std::to_string(d.reset_s);
}

size_t RateLimiter::tracked_clients() const {
    std::lock_guard lock(mutex_);
    return buckets_.size();
}

}  // namespace minfer::book
