// One streamed OpenAI completion as vLLM's benchmark client reads it: the
// request body it sends, and what each SSE event of the answer means for the
// request's timings (vllm/benchmarks/lib/endpoint_request_func.py).
#pragma once

#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "server/bench/dataset.h"
#include "server/bench/metrics.h"

namespace minfer::bench {

// The JSON body: /v1/completions gets {prompt, max_tokens}; chat gets
// {messages: [{role: user, content}], max_completion_tokens, max_tokens};
// both stream with usage in the last chunk. ignore_eos is a vLLM / llama.cpp
// extension, sent only when asked for. `extra`'s fields are set last, over the
// others (vLLM's --extra-body: a response_format, sampling parameters).
std::string request_body(const BenchPrompt& p, const std::string& model, bool chat, bool ignore_eos,
                         const boost::json::object& extra = {});

// Reads the events of one answer into a RequestRecord. Every chunk with a
// non-empty `choices` counts as a token arrival, as in vLLM (its text may be
// empty, e.g. for a special token): the first sets TTFT, each later one adds
// an ITL gap, the last sets the latency. A `usage` object gives the token
// counts. `data: [DONE]` ends the stream.
class OpenAIStream {
public:
    OpenAIStream(RequestRecord& rec, bool chat) : rec_(rec), chat_(chat) {}

    // `now` is seconds since the benchmark start. Throws std::runtime_error
    // for data that is not a JSON object, or an `error` object in the stream.
    void on_event(std::string_view data, double now);

    bool done() const { return done_; }
    bool got_chunk() const { return chunks_ > 0; }
    bool got_usage() const { return got_usage_; }
    double last_chunk_time() const { return last_; }

private:
    RequestRecord& rec_;
    bool chat_;
    bool done_ = false, got_usage_ = false;
    int64_t chunks_ = 0;
    double last_ = 0;
};

}  // namespace minfer::bench
