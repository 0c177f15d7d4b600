#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace minfer {

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
    {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = &fn;
        n_ = n;
        chunk_ = (n + parts - 1) / parts;
        parts_ = parts;
        pending_ = parts - 1;
        ++generation_;
    }
    wake_.notify_all();
    fn(0, std::min(chunk_, n));
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void ThreadPool::work(int index) {
    uint64_t seen = 0;
    for (;;) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        const int64_t begin = index * chunk_, end = std::min(n_, begin + chunk_);
        const auto* job = job_;
        if (index >= parts_) continue;  // this job has fewer parts than threads
        lock.unlock();
        if (begin < end) (*job)(begin, end);
        lock.lock();
        if (--pending_ == 0) done_.notify_one();
    }
}

}  // namespace minfer
