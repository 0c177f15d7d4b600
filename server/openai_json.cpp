#include "server/openai_json.h"

#include <algorithm>
#include <cctype>

namespace minfer {

namespace json = boost::json;

namespace {

const char* error_type(http::status status) {
    switch (status) {
        case http::status::unauthorized: return "AuthenticationError";
        case http::status::not_found: return "NotFoundError";
        case http::status::payload_too_large: return "RequestTooLargeError";
        case http::status::service_unavailable: return "ServiceUnavailableError";
        case http::status::internal_server_error: return "InternalServerError";
        default: return "BadRequestError";
    }
}

std::string sse(const json::value& v) { return "data: " + json::serialize(v) + "\n\n"; }

json::value stop_reason(const CompletionChoice& c) {
    if (!c.stop_string.empty()) return json::value(c.stop_string);
    if (c.stop_token >= 0) return json::value(c.stop_token);
    return nullptr;
}

json::array byte_values(const std::string& s) {
    json::array a;
    for (unsigned char c : s) a.emplace_back(int(c));
    return a;
}

}  // namespace

HttpResponse error_response(http::status status, const std::string& message, unsigned version, const char* type) {
    json::object error{{"message", message},
                       {"type", type ? type : error_type(status)},
                       {"param", nullptr},
                       {"code", static_cast<int>(status)}};
    return json_response(json::object{{"error", std::move(error)}}, version, status);
}

HttpResponse json_response(const json::value& body, unsigned version, http::status status) {
    HttpResponse res{status, version};
    res.set(http::field::content_type, "application/json");
    res.body() = json::serialize(body);
    return res;
}

ResponseBuilder::ResponseBuilder(const Tokenizer& tokenizer, bool chat, std::string id, int64_t created,
                                 std::string model, const GenerationOptions& options,
                                 const std::vector<std::vector<int32_t>>& prompts)
    : tokenizer_(tokenizer),
      chat_(chat),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      options_(options),
      prompts_(prompts),
      choices_(prompts.size()),
      prompt_logprobs_(prompts.size()),
      started_(prompts.size() * size_t(options.n), false) {}

void ResponseBuilder::accumulate(size_t prompt_index, const RequestOutput& out) {
    minfer::accumulate(choices_[prompt_index], prompt_logprobs_[prompt_index], out);
}

void ResponseBuilder::read_tool_calls(ToolCallFormat format) {
    tool_format_ = format;
    tool_streams_.assign(started_.size(), ToolCallStream(format));
}

std::string ResponseBuilder::finish_reason(size_t prompt_index) const {
    const auto& cs = choices_[prompt_index];
    return cs.empty() || cs.front().finish_reason.empty() ? "abort" : cs.front().finish_reason;
}

json::object ResponseBuilder::chunk_envelope() const {
    return {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"}, {"created", created_}, {"model", model_}};
}

json::object ResponseBuilder::usage() const {
    int64_t prompt = 0, completion = 0;
    for (const auto& p : prompts_) prompt += int64_t(p.size());
    for (const auto& cs : choices_)
        for (const CompletionChoice& c : cs) completion += int64_t(c.token_ids.size());
    return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json::value ResponseBuilder::chat_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprob>& lps) const {
    json::array content;
    for (size_t i = 0; i < lps.size() && i < ids.size(); ++i) {
        const std::string token = tokenizer_.decode(std::span<const int32_t>(&ids[i], 1));
        json::array top;
        for (const auto& [t, lp] : lps[i].top) {
            const std::string s = tokenizer_.decode(std::span<const int32_t>(&t, 1));
            top.push_back(json::object{{"token", s}, {"logprob", lp}, {"bytes", byte_values(s)}});
        }
        content.push_back(json::object{
            {"token", token}, {"logprob", lps[i].logprob}, {"bytes", byte_values(token)}, {"top_logprobs", std::move(top)}});
    }
    return json::object{{"content", std::move(content)}};
}

std::vector<std::string> ResponseBuilder::stream_chunks(size_t prompt_index, const RequestOutput& out) {
    accumulate(prompt_index, out);
    std::vector<std::string> chunks;
    for (const SampleOutput& s : out.samples) {
        const size_t index = choice_index(prompt_index, s.index);
        const bool first = !started_[index];
        started_[index] = true;
        const std::string finish = s.finish_reason.value_or("");
        json::value finish_json = finish.empty() ? json::value(nullptr) : json::value(finish);
        json::object choice{{"index", index}};
        json::value logprobs = nullptr;
        if (options_.logprobs >= 0 && !s.logprobs.empty()) {
            if (chat_) {
                logprobs = chat_logprobs(s.token_ids, s.logprobs);
            } else {
                CompletionChoice part;
                part.token_ids = s.token_ids;
                part.logprobs = s.logprobs;
                logprobs = completion_logprobs_json(tokenizer_, part, nullptr, {});
            }
        }
        if (chat_) {
            if (first) {  // the role comes alone in the first chunk, as OpenAI sends it
                json::object c = chunk_envelope();
                c["choices"] = json::array{json::object{{"index", index},
                                                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                        {"logprobs", nullptr},
                                                        {"finish_reason", nullptr}}};
                chunks.push_back(sse(c));
            }
            if (s.text.empty() && finish.empty()) continue;
            json::object delta;
            if (tool_format_) {  // content and tool-call deltas from the whole text so far
                const auto& cs = choices_[prompt_index];
                auto it = std::find_if(cs.begin(), cs.end(), [&](const CompletionChoice& c) { return c.index == s.index; });
                ToolCallStream::Delta d = tool_streams_[index].update(it->text, !finish.empty());
                if (!d.content.empty()) delta["content"] = std::move(d.content);
                if (!d.tool_calls.empty()) delta["tool_calls"] = std::move(d.tool_calls);
                if (delta.empty() && finish.empty()) continue;
                if (finish == "stop" && tool_streams_[index].num_calls() > 0) finish_json = "tool_calls";
            } else if (!s.text.empty()) {
                delta["content"] = s.text;
            }
            choice["delta"] = std::move(delta);
        } else {
            std::string text = s.text;
            if (first && options_.echo) text = tokenizer_.decode(prompts_[prompt_index]) + text;
            if (text.empty() && finish.empty()) continue;
            choice["text"] = text;
        }
        choice["logprobs"] = logprobs;
        choice["finish_reason"] = finish_json;
        if (!finish.empty()) {
            const auto& cs = choices_[prompt_index];
            auto it = std::find_if(cs.begin(), cs.end(), [&](const CompletionChoice& c) { return c.index == s.index; });
            choice["stop_reason"] = it != cs.end() ? stop_reason(*it) : json::value(nullptr);
        }
        json::object c = chunk_envelope();
        c["choices"] = json::array{std::move(choice)};
        chunks.push_back(sse(c));
    }
    return chunks;
}

std::string ResponseBuilder::usage_chunk() const {
    json::object c = chunk_envelope();
    c["choices"] = json::array{};
    c["usage"] = usage();
    return sse(c);
}

json::object ResponseBuilder::response() const {
    json::array choices;
    for (size_t p = 0; p < choices_.size(); ++p) {
        const std::string prompt_text = !chat_ && options_.echo ? tokenizer_.decode(prompts_[p]) : "";
        for (const CompletionChoice& c : choices_[p]) {
            json::object choice{{"index", choice_index(p, c.index)}};
            json::value logprobs = nullptr;
            std::string finish = c.finish_reason;
            if (chat_) {
                json::object message{{"role", "assistant"}, {"content", c.text}};
                if (tool_format_)
                    if (ToolCallParse p = parse_tool_calls(*tool_format_, c.text, /*final=*/true); !p.calls.empty()) {
                        const bool blank = std::all_of(p.content.begin(), p.content.end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); });
                        message["content"] = blank ? json::value(nullptr) : json::value(p.content);
                        message["tool_calls"] = tool_calls_json(p.calls);
                        if (finish == "stop") finish = "tool_calls";
                    }
                choice["message"] = std::move(message);
                if (options_.logprobs >= 0) logprobs = chat_logprobs(c.token_ids, c.logprobs);
            } else {
                choice["text"] = prompt_text + c.text;
                if (options_.logprobs >= 0)
                    logprobs = completion_logprobs_json(tokenizer_, c, options_.echo ? &prompts_[p] : nullptr,
                                                        prompt_logprobs_[p]);
            }
            choice["logprobs"] = logprobs;
            choice["finish_reason"] = finish;
            choice["stop_reason"] = stop_reason(c);
            choices.push_back(std::move(choice));
        }
    }
    std::sort(choices.begin(), choices.end(), [](const json::value& a, const json::value& b) {
        return a.at("index").to_number<int64_t>() < b.at("index").to_number<int64_t>();
    });
    return {{"id", id_},         {"object", chat_ ? "chat.completion" : "text_completion"},
            {"created", created_}, {"model", model_},
            {"choices", std::move(choices)}, {"usage", usage()}};
}

}  // namespace minfer
