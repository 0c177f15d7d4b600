#include "engine/core/mask_workers.h"

#include <algorithm>

namespace minfer {

MaskWorkers::MaskWorkers(int threads) {
    if (threads <= 0) threads = std::clamp(int(std::thread::hardware_concurrency()) - 1, 0, 7);
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

MaskWorkers::~MaskWorkers() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
}

void MaskWorkers::take_jobs(std::unique_lock<std::mutex>& lock) {
    while (job_ && next_ < count_) {
        const size_t i = next_++;
        const std::function<void(size_t)>& job = *job_;
        lock.unlock();
        job(i);
        lock.lock();
        if (++finished_ == count_) done_.notify_all();
    }
}

void MaskWorkers::work() {
    std::unique_lock lock(mu_);
    while (true) {
        wake_.wait(lock, [&] { return stop_ || (job_ && next_ < count_); });
        if (stop_) return;
        take_jobs(lock);
    }
}

void MaskWorkers::run(size_t n, const std::function<void(size_t)>& job) {
    if (n == 0) return;
    if (threads_.empty() || n == 1) {
        for (size_t i = 0; i < n; ++i) job(i);
        return;
    }
    std::unique_lock lock(mu_);
    job_ = &job;
    next_ = 0;
    count_ = n;
    finished_ = 0;
    wake_.notify_all();
    take_jobs(lock);
    done_.wait(lock, [&] { return finished_ == count_; });
    job_ = nullptr;
}

}  // namespace minfer
