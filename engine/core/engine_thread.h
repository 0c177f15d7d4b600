// EngineThread: an LLMEngine on its own thread, for callers on other threads
// (the HTTP server's). Requests and aborts go in through a queue; each
// request's outputs come back through its callback, called on the engine
// thread (keep it short: hand the output to the caller's own thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
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

    // Queues a request. The future gives its id once the engine has accepted
    // it, or throws the RequestError that rejected it. on_output sees every
    // output of the request, the last one with finished = true.
    std::future<uint64_t> submit(std::vector<int32_t> prompt, GenerationOptions options, OnOutput on_output);
    // The same without blocking anyone: on_accepted(id, nullptr) once the
    // engine has taken it, or on_accepted(0, &message) when it was refused;
    // called on the engine thread, before any output.
    using OnAccepted = std::function<void(uint64_t, const std::string*)>;
    void submit(std::vector<int32_t> prompt, GenerationOptions options, OnOutput on_output, OnAccepted on_accepted);
    void abort(uint64_t request_id);

    // A copy of the engine's statistics after its latest step.
    EngineStats stats() const;
    // Ends the loop: requests still running are aborted (their callbacks see
    // finish_reason "abort"), so none is left without an answer.
    void stop();

private:
    struct Submission {
        std::vector<int32_t> prompt;
        GenerationOptions options;
        OnOutput on_output;
        std::promise<uint64_t> accepted;
        OnAccepted on_accepted;  // when set, instead of the promise
    };
    void loop();
    void deliver(const std::vector<RequestOutput>& outputs);

    LLMEngine& engine_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Submission> submissions_;
    std::vector<uint64_t> aborts_;
    bool stopping_ = false;
    EngineStats stats_;
    std::unordered_map<uint64_t, OnOutput> callbacks_;  // engine thread only
    std::thread thread_;
};

}  // namespace minfer
