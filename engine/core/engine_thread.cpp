#include "engine/core/engine_thread.h"

namespace minfer {

EngineThread::EngineThread(LLMEngine& engine) : engine_(engine), stats_(engine.stats()) {
    thread_ = std::thread([this] { loop(); });
}

EngineThread::~EngineThread() { stop(); }

std::future<uint64_t> EngineThread::submit(std::vector<int32_t> prompt, GenerationOptions options,
                                           OnOutput on_output) {
    Submission s{std::move(prompt), std::move(options), std::move(on_output), {}, {}};
    std::future<uint64_t> accepted = s.accepted.get_future();
    {
        std::lock_guard lock(mutex_);
        if (stopping_) {
            s.accepted.set_exception(std::make_exception_ptr(RequestError("the engine is shutting down")));
            return accepted;
        }
        submissions_.push_back(std::move(s));
    }
    wake_.notify_one();
    return accepted;
}

void EngineThread::submit(std::vector<int32_t> prompt, GenerationOptions options, OnOutput on_output,
                          OnAccepted on_accepted) {
    Submission s{std::move(prompt), std::move(options), std::move(on_output), {}, std::move(on_accepted)};
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            submissions_.push_back(std::move(s));
            wake_.notify_one();
            return;
        }
    }
    const std::string message = "the engine is shutting down";
    s.on_accepted(0, &message);
}

void EngineThread::abort(uint64_t request_id) {
    {
        std::lock_guard lock(mutex_);
        aborts_.push_back(request_id);
    }
    wake_.notify_one();
}

EngineStats EngineThread::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

void EngineThread::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ && !thread_.joinable()) return;
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

void EngineThread::deliver(const std::vector<RequestOutput>& outputs) {
    for (const RequestOutput& out : outputs) {
        auto it = callbacks_.find(out.request_id);
        if (it == callbacks_.end()) continue;
        it->second(out);
        if (out.finished) callbacks_.erase(it);
    }
}

void EngineThread::loop() {
    while (true) {
        std::deque<Submission> submissions;
        std::vector<uint64_t> aborts;
        bool stopping = false;
        if (!engine_.has_unfinished()) engine_.wait_for_work();
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] {
                return stopping_ || !submissions_.empty() || !aborts_.empty() || engine_.has_unfinished();
            });
            submissions.swap(submissions_);
            aborts.swap(aborts_);
            stopping = stopping_;
        }
        for (Submission& s : submissions) {
            try {
                const uint64_t id = engine_.add_request(std::move(s.prompt), std::move(s.options));
                callbacks_[id] = std::move(s.on_output);
                if (s.on_accepted) s.on_accepted(id, nullptr);
                else s.accepted.set_value(id);
            } catch (const std::exception& e) {
                const std::string message = e.what();
                if (s.on_accepted) s.on_accepted(0, &message);
                else s.accepted.set_exception(std::current_exception());
            }
        }
        for (uint64_t id : aborts) engine_.abort(id);
        if (stopping) {
            std::vector<uint64_t> live;
            for (const auto& [id, cb] : callbacks_) live.push_back(id);
            for (uint64_t id : live) engine_.abort(id);
        }
        if (engine_.has_unfinished() || !aborts.empty() || stopping) deliver(engine_.step());
        {
            std::lock_guard lock(mutex_);
            stats_ = engine_.stats();
        }
        if (stopping) return;
    }
}

}  // namespace minfer
