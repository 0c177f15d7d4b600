// EngineThread: an LLMEngine on its own thread, for callers on other threads
// (the HTTP server's). A request is validated on the caller's thread (the
// engine's validate() reads only what never changes), gets its id there, and
// goes in through a queue with the aborts; each request's outputs come back
// through its callback, called on the engine thread (keep it short: hand the
// output to the caller's own thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/core/llm_engine.h"

namespace minfer {

class EngineThread {
public:
    using OnOutput = std::function<void(const RequestOutput&)>;

    explicit EngineThread(LLMEngine& engine);
    ~EngineThread();  // stop()
    EngineThread(const EngineThread&) = delete;
    EngineThread& operator=(const EngineThread&) = delete;

    // Validates a request here, on the caller's thread, and queues it: returns
    // its id, or throws the RequestError that rejects it (the engine is
    // stopping, or the request is invalid). on_output sees every output of the
    // request, the last one with finished = true.
    uint64_t submit(std::vector<int32_t> prompt, GenerationOptions options, OnOutput on_output);
    // The engine's checks alone (any thread): throws RequestError.
    void validate(const std::vector<int32_t>& prompt, GenerationOptions& options) const {
        engine_.validate(prompt, options);
    }
    void abort(uint64_t request_id);
    // Runs `work` on the engine thread between two steps (the engine is not
    // thread-safe) and waits for it: returns what it returns, or rethrows what
    // it throws. Throws RequestError once the engine is stopping.
    template <class Work>
    auto call(Work work) -> decltype(work(std::declval<LLMEngine&>())) {
        using Result = decltype(work(std::declval<LLMEngine&>()));
        std::packaged_task<Result()> task([this, w = std::move(work)]() mutable { return w(engine_); });
        std::future<Result> done = task.get_future();
        {
            std::lock_guard lock(mutex_);
            if (stopping_) throw RequestError("the engine is shutting down");
            calls_.emplace_back([t = std::make_shared<decltype(task)>(std::move(task))] { (*t)(); });
        }
        wake_.notify_one();
        return done.get();
    }
    // Requests submitted that the engine has not taken yet.
    size_t num_queued() const;

    // A copy of the engine's statistics: as of the step in progress (taken once
    // it is scheduled), else after the latest one.
    EngineStats stats() const;
    // How long the step in progress has run so far (0 between steps): a
    // readiness check tells a busy engine from a stuck one by it.
    double seconds_in_step() const;
    // Ends the loop: requests still running are aborted (their callbacks see
    // finish_reason "abort"), so none is left without an answer.
    void stop();

private:
    struct Submission {
        uint64_t id;
        std::vector<int32_t> prompt;
        GenerationOptions options;
        OnOutput on_output;
    };
    using Clock = std::chrono::steady_clock;
    void loop();
    void deliver(const std::vector<RequestOutput>& outputs);
    void publish(bool in_step);  // stats_ and the step's start, under the lock

    LLMEngine& engine_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Submission> submissions_;
    std::vector<uint64_t> aborts_;
    std::deque<std::function<void()>> calls_;
    bool stopping_ = false;
    uint64_t next_id_ = 1;
    EngineStats stats_;
    bool in_step_ = false;
    Clock::time_point step_began_;
    std::unordered_map<uint64_t, OnOutput> callbacks_;  // engine thread only
    std::thread thread_;
};

}  // namespace minfer
