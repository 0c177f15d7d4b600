#include "server/bench/openai_stream.h"

#include <boost/json.hpp>
#include <stdexcept>

namespace minfer::bench {

namespace json = boost::json;

std::string request_body(const BenchPrompt& p, const std::string& model, bool chat, bool ignore_eos,
                         const json::object& extra) {
    json::object o;
    o["model"] = model;
    if (chat) {
        o["messages"] = json::array{json::object{{"role", "user"}, {"content", p.prompt}}};
        // Newer servers read max_completion_tokens, older ones max_tokens.
        o["max_completion_tokens"] = p.output_len;
        o["max_tokens"] = p.output_len;
    } else {
        o["prompt"] = p.prompt;
        o["max_tokens"] = p.output_len;
    }
    o["temperature"] = 0.0;  // greedy, as vLLM's benchmark asks: outputs comparable across servers and runs
    o["stream"] = true;
    o["stream_options"] = json::object{{"include_usage", true}};
    if (ignore_eos) o["ignore_eos"] = true;
    for (const auto& kv : extra) o[kv.key()] = kv.value();
    return json::serialize(o);
}

namespace {

std::string short_text(std::string_view s) {
    return s.size() > 200 ? std::string(s.substr(0, 200)) + "..." : std::string(s);
}

}  // namespace

void OpenAIStream::on_event(std::string_view data, double now) {
    if (data == "[DONE]") {
        done_ = true;
        return;
    }
    json::value v;
    boost::system::error_code ec;
    v = json::parse(data, ec);
    if (ec || !v.is_object()) throw std::runtime_error("malformed stream: " + short_text(data));
    const json::object& o = v.as_object();
    if (const auto* err = o.if_contains("error")) {
        const auto* msg = err->is_object() ? err->as_object().if_contains("message") : nullptr;
        throw std::runtime_error("error in stream: " +
                                 (msg && msg->is_string() ? std::string(msg->as_string()) : short_text(data)));
    }
    const auto* choices = o.if_contains("choices");
    if (choices && choices->is_array() && !choices->as_array().empty()) {
        if (chunks_ == 0) rec_.ttft = now - rec_.start;
        else rec_.itl.push_back(now - last_);
        last_ = now;
        chunks_++;
        const auto& c0 = choices->as_array()[0];
        const json::value* text = nullptr;
        if (c0.is_object()) {
            if (chat_) {
                const auto* delta = c0.as_object().if_contains("delta");
                text = delta && delta->is_object() ? delta->as_object().if_contains("content") : nullptr;
            } else {
                text = c0.as_object().if_contains("text");
            }
        }
        if (text && text->is_string()) rec_.text += text->as_string();
    }
    // Some servers put usage on the last chunk with choices, others on a chunk
    // of its own; either way it is the server's own count.
    const auto* usage = o.if_contains("usage");
    if (usage && usage->is_object()) {
        const auto& u = usage->as_object();
        if (const auto* ct = u.if_contains("completion_tokens"); ct && ct->is_int64()) {
            rec_.output_tokens = static_cast<int32_t>(ct->as_int64());
            got_usage_ = true;
        }
        if (const auto* pt = u.if_contains("prompt_tokens"); pt && pt->is_int64())
            rec_.prompt_len = static_cast<int32_t>(pt->as_int64());
    }
}

}  // namespace minfer::bench
