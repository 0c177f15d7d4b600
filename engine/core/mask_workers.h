// The step's grammar masks, computed on several threads: each constrained
// sequence's mask is a walk of its own recognizer (engine/grammar), and a
// batch of them is independent work. The calling thread takes part; the
// workers sleep between steps.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace minfer {

class MaskWorkers {
public:
    // threads: the helpers beside the caller (0: one less than the machine's cores, at most 7).
    explicit MaskWorkers(int threads = 0);
    ~MaskWorkers();
    MaskWorkers(const MaskWorkers&) = delete;
    MaskWorkers& operator=(const MaskWorkers&) = delete;

    // Runs job(i) for every i in [0, n) and returns when all are done.
    void run(size_t n, const std::function<void(size_t)>& job);

private:
    void work();
    // Takes jobs of the current run until none is left.
    void take_jobs(std::unique_lock<std::mutex>& lock);

    std::mutex mu_;
    std::condition_variable wake_, done_;
    const std::function<void(size_t)>* job_ = nullptr;
    size_t next_ = 0, count_ = 0, finished_ = 0;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace minfer
