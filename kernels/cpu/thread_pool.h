// A fixed pool of worker threads for data-parallel loops: parallel_for splits
// [0, n) into one contiguous range per thread and returns when all are done.
// The calling thread takes the first range, so a pool of N threads runs on N
// cores with N - 1 workers and no oversubscription.
//
// A decode step is hundreds of short loops, so waking workers must cost
// microseconds: workers spin for a while on an atomic job counter before they
// sleep on a condition variable, and the caller spins for completion.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace minfer::cpu {

class ThreadPool {
public:
    // threads <= 0: one per available core.
    explicit ThreadPool(int threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // fn(begin, end) over contiguous ranges of [0, n), each at least `grain`
    // long (except the last), run on up to size() threads. Not reentrant.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

private:
    void work(int index);

    std::vector<std::thread> workers_;
    // The current job. The caller writes it between two bumps of `generation_`
    // (odd while it writes), and a worker takes it when generation_ reads the
    // same even value before and after: a worker that sat out a smaller job
    // may wake when the caller is already on the next one, and must not take
    // half of one job and half of the other.
    std::atomic<const std::function<void(int64_t, int64_t)>*> job_{nullptr};
    std::atomic<int64_t> n_{0}, chunk_{0};
    std::atomic<int> parts_{0};
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    // Sleeping workers wait here; `sleepers_` tells the caller whether to notify.
    std::mutex mu_;
    std::condition_variable wake_;
    std::atomic<int> sleepers_{0};
};

}  // namespace minfer::cpu
