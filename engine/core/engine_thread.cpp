#include "engine/core/engine_thread.h"

namespace minfer {

EngineThread::EngineThread(LLMEngine& engine) : engine_(engine), stats_(engine.stats()) {
    engine_.set_on_scheduled([this] { publish(true); });
    thread_ = std::thread([this] { loop(); });
}

EngineThread::~EngineThread() {
    stop();
    engine_.set_on_scheduled(nullptr);
}

uint64_t EngineThread::submit(std::vector<int32_t> prompt, GenerationOptions options, OnOutput on_output) {
    engine_.validate(prompt, options);  // throws RequestError
    uint64_t id = 0;
    {
        std::lock_guard lock(mutex_);
        if (stopping_) throw RequestError("the engine is shutting down");
        id = next_id_++;
        submissions_.push_back({id, std::move(prompt), std::move(options), std::move(on_output)});
    }
    wake_.notify_one();
    return id;
}

size_t EngineThread::num_queued() const {
    std::lock_guard lock(mutex_);
    return submissions_.size();
}

void EngineThread::abort(uint64_t request_id) {
    {
        std::lock_guard lock(mutex_);
        aborts_.push_back(request_id);
    }
    wake_.notify_one();
}

EngineStats EngineThread::stats() const {
    EngineStats st;
    {
        std::lock_guard lock(mutex_);
        st = stats_;
    }
    // The KV sender takes staged prompts between steps: read the store itself (thread-safe).
    st.kv_staged_bytes = engine_.staged_kv()->bytes();
    return st;
}

double EngineThread::seconds_in_step() const {
    std::lock_guard lock(mutex_);
    return in_step_ ? std::chrono::duration<double>(Clock::now() - step_began_).count() : 0.0;
}

void EngineThread::publish(bool in_step) {
    EngineStats st = engine_.stats();
    std::lock_guard lock(mutex_);
    stats_ = st;
    if (in_step && !in_step_) step_began_ = Clock::now();
    in_step_ = in_step;
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
        std::deque<std::function<void()>> calls;
        bool stopping = false;
        if (!engine_.has_unfinished()) engine_.wait_for_work();
        {
            std::unique_lock lock(mutex_);
            auto work = [&] {
                return stopping_ || !submissions_.empty() || !aborts_.empty() || !calls_.empty() ||
                       engine_.has_unfinished();
            };
            // Parked KV blocks expire even while no request comes: wake now and then.
            if (engine_.has_parked_kv())
                wake_.wait_for(lock, std::chrono::seconds(1), work);
            else
                wake_.wait(lock, work);
            submissions.swap(submissions_);
            aborts.swap(aborts_);
            calls.swap(calls_);
            stopping = stopping_;
        }
        for (auto& call : calls) call();  // a packaged task: its exception goes to the caller
        engine_.expire_parked_kv();
        for (Submission& s : submissions) {
            callbacks_[s.id] = std::move(s.on_output);
            try {
                engine_.add_request(s.id, std::move(s.prompt), std::move(s.options));
            } catch (const std::exception&) {
                // Validated before it was queued, so this cannot happen; if it
                // does, the caller still gets an answer.
                RequestOutput gone;
                gone.request_id = s.id;
                gone.finished = true;
                SampleOutput aborted;
                aborted.finish_reason = "abort";
                gone.samples.push_back(std::move(aborted));
                deliver({gone});
            }
        }
        for (uint64_t id : aborts) engine_.abort(id);
        if (stopping) {
            std::vector<uint64_t> live;
            for (const auto& [id, cb] : callbacks_) live.push_back(id);
            for (uint64_t id : live) engine_.abort(id);
        }
        if (engine_.has_unfinished() || !aborts.empty() || stopping) deliver(engine_.step());
        publish(false);
        if (stopping) return;
    }
}

}  // namespace minfer
