#include "kernels/cpu/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

#include "kernels/world.h"

namespace minfer::cpu {

namespace {
// About 50 microseconds of spinning before a worker sleeps.
constexpr int kSpinRounds = 20000;
inline void pause() { _mm_pause(); }
}  // namespace

ThreadPool::ThreadPool(int threads) {
    threads = cpu_threads_for(World{}, threads);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    const int64_t max_parts = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
    const int parts = static_cast<int>(std::min<int64_t>(size(), max_parts));
    if (parts == 1) {
        fn(0, n);
        return;
    }
    const int64_t chunk = (n + parts - 1) / parts;
    {
        // Publishing under the lock means a worker about to sleep cannot miss it.
        std::lock_guard<std::mutex> lock(mu_);
        generation_.fetch_add(1, std::memory_order_acq_rel);  // odd: the fields change
        job_.store(&fn, std::memory_order_relaxed);
        n_.store(n, std::memory_order_relaxed);
        chunk_.store(chunk, std::memory_order_relaxed);
        parts_.store(parts, std::memory_order_relaxed);
        pending_.store(parts - 1, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);  // even: published
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
    fn(0, std::min(chunk, n));
    while (pending_.load(std::memory_order_acquire) > 0) pause();
}

void ThreadPool::work(int index) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t gen = generation_.load(std::memory_order_acquire);
        for (int spin = 0; gen == seen && spin < kSpinRounds && !stop_.load(std::memory_order_relaxed); ++spin) {
            pause();
            gen = generation_.load(std::memory_order_acquire);
        }
        if (gen == seen) {
            std::unique_lock<std::mutex> lock(mu_);
            sleepers_.fetch_add(1, std::memory_order_acq_rel);
            wake_.wait(lock, [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
            sleepers_.fetch_sub(1, std::memory_order_acq_rel);
            gen = generation_.load(std::memory_order_acquire);
        }
        if (stop_.load()) return;
        // The job of an even generation that did not change while it was read.
        if (gen % 2) continue;
        const auto* job = job_.load(std::memory_order_relaxed);
        const int64_t n = n_.load(std::memory_order_relaxed), chunk = chunk_.load(std::memory_order_relaxed);
        const int parts = parts_.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (generation_.load(std::memory_order_relaxed) != gen) continue;
        seen = gen;
        if (index >= parts) continue;  // this job has fewer parts than threads
        const int64_t begin = index * chunk, end = std::min(n, begin + chunk);
        if (begin < end) (*job)(begin, end);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace minfer::cpu
