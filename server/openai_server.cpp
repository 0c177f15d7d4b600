#include "server/openai_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <chrono>
#include <csignal>
#include <deque>
#include <mutex>
#include <random>

#include "engine/text/chat_prompt.h"
#include "server/tool_calls.h"
#include "server/completion_json.h"
#include "server/openai_json.h"

namespace minfer {

// Responses are always named before they are co_awaited (`HttpResponse reply = ...;
// co_await res.send(std::move(reply));`): GCC 12 mishandles temporaries that
// live across a suspension inside one full-expression.

namespace json = boost::json;
using asio::awaitable;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

namespace {

// An output the engine thread hands to a request's coroutine on the I/O thread.
struct EngineEvent {
    size_t prompt_index = 0;
    RequestOutput output;
    Clock::time_point at;
};

// A request's events in arrival order. push() runs on the engine thread; the
// wake-up is posted to the I/O thread, where pop() runs, so a pop that found
// the queue empty is always waiting by the time the wake-up cancels its timer.
// interrupt() (on the I/O thread: the client left, a deadline passed) makes the
// next pop return nullopt, once.
class OutputQueue : public std::enable_shared_from_this<OutputQueue> {
public:
    explicit OutputQueue(asio::io_context& io) : io_(io), wake_(io) {}

    void push(EngineEvent e) {
        e.at = Clock::now();
        {
            std::lock_guard lock(mutex_);
            events_.push_back(std::move(e));
        }
        asio::post(io_, [self = shared_from_this()] { self->wake_.cancel(); });
    }

    void interrupt() {
        interrupted_ = true;
        wake_.cancel();
    }

    awaitable<std::optional<EngineEvent>> pop() {
        while (true) {
            if (interrupted_) {
                interrupted_ = false;
                co_return std::nullopt;
            }
            {
                std::lock_guard lock(mutex_);
                if (!events_.empty()) {
                    EngineEvent e = std::move(events_.front());
                    events_.pop_front();
                    co_return e;
                }
            }
            wake_.expires_at(asio::steady_timer::time_point::max());
            boost::system::error_code ec;
            co_await wake_.async_wait(asio::redirect_error(use_awaitable, ec));
        }
    }

private:
    asio::io_context& io_;
    asio::steady_timer wake_;
    std::mutex mutex_;
    std::deque<EngineEvent> events_;
    bool interrupted_ = false;  // I/O thread only
};

// Submits prompt `index` of a request (validated here: throws RequestError);
// its outputs arrive in `queue`. Returns the engine's request id.
uint64_t submit(EngineThread& engine, const std::shared_ptr<OutputQueue>& queue, size_t index,
                std::vector<int32_t> prompt, GenerationOptions options) {
    return engine.submit(std::move(prompt), std::move(options),
                         [queue, index](const RequestOutput& out) { queue->push({index, out, {}}); });
}

// One engine request (one prompt of the HTTP request) as the server times it.
struct Tracked {
    uint64_t id = 0;
    bool finished = false;
    Clock::time_point last_token;
    RequestTiming timing;
};

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return fmt::format("{}-{:016x}{:08x}", prefix, rng(), uint32_t(rng()));
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string_view path_of(const HttpRequest& req) {
    std::string_view t(req.target().data(), req.target().size());
    return t.substr(0, t.find('?'));
}

// The body as a JSON object, or the 400 message.
std::optional<json::object> parse_body(const HttpRequest& req, std::string& error) {
    boost::system::error_code ec;
    json::value v = json::parse(req.body(), ec);
    if (ec) {
        error = "the request body is not valid JSON: " + ec.message();
        return std::nullopt;
    }
    if (!v.is_object()) {
        error = "the request body must be a JSON object";
        return std::nullopt;
    }
    return std::move(v.as_object());
}

// Chat content may be a string or a list of parts; only text parts are
// supported, joined by newlines (as vLLM does).
json::array normalize_messages(const json::value* messages) {
    if (!messages || !messages->is_array() || messages->as_array().empty())
        throw RequestError("'messages' must be a non-empty array of {role, content} objects");
    json::array out;
    for (const json::value& m : messages->as_array()) {
        if (!m.is_object()) throw RequestError("each message must be an object with 'role' and 'content'");
        json::object msg = m.as_object();
        const json::value* role = msg.if_contains("role");
        if (!role || !role->is_string()) throw RequestError("each message needs a string 'role'");
        if (json::value* content = msg.if_contains("content"); content && content->is_array()) {
            std::string text;
            for (const json::value& part : content->as_array()) {
                const json::object* p = part.if_object();
                const json::value* type = p ? p->if_contains("type") : nullptr;
                const json::value* t = p ? p->if_contains("text") : nullptr;
                if (!type || !type->is_string() || type->get_string() != "text" || !t || !t->is_string())
                    throw RequestError("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
                if (!text.empty()) text += "\n";
                text += t->get_string();
            }
            *content = text;
        } else if (content && !content->is_string() && !content->is_null()) {
            throw RequestError("a message's 'content' must be a string or a list of text parts");
        }
        out.push_back(std::move(msg));
    }
    return out;
}

}  // namespace

OpenAIServer::OpenAIServer(LLMEngine& engine, const ChatTemplate& chat_template, ServerConfig config)
    : llm_(engine), tokenizer_(engine.tokenizer()), chat_template_(chat_template), config_(std::move(config)) {
    created_ = unix_now();
    engine_ = std::make_unique<EngineThread>(llm_);
    if (config_.kv_transfer) kv_ = std::make_unique<KVTransfer>(*engine_, *config_.kv_transfer);
    http_ = std::make_unique<HttpServer>(
        io_, config_.host, config_.port, config_.http,
        [this](const HttpRequest& req, HttpResponder& res) { return handle(req, res); },
        [](http::status status, const std::string& message, unsigned version) {
            return error_response(status, message, version);
        });
}

OpenAIServer::~OpenAIServer() {
    kv_pool_.join();
    if (kv_) kv_->stop();
    if (engine_) engine_->stop();
}

void OpenAIServer::run() {
    asio::signal_set signals(io_, SIGINT, SIGTERM);
    signals.async_wait([this](const boost::system::error_code& ec, int signal) {
        if (ec) return;
        spdlog::info("signal {}: finishing {} request(s) in flight, then exiting", signal, http_->in_flight());
        http_->drain([this] { io_.stop(); });
    });
    http_->start();
    spdlog::info("serving {} on http://{}:{} (engine: {} KV blocks of {} tokens in {}, max_model_len {})",
                 config_.served_model_name, config_.host, port(), llm_.config().num_kv_blocks,
                 llm_.config().block_size, kv_dtype_name(llm_.config().kv_cache_dtype.value_or(KVDType::F32)),
                 llm_.max_model_len());
    io_.run();
    kv_pool_.join();
    if (kv_) kv_->stop();
    engine_->stop();
}

void OpenAIServer::stop() {
    asio::post(io_, [this] { http_->drain([this] { io_.stop(); }); });
}

awaitable<void> OpenAIServer::handle(const HttpRequest& req, HttpResponder& res) {
    const Clock::time_point start = Clock::now();
    AccessNote note;
    co_await route(req, res, note);
    if (!config_.access_log) co_return;
    // One line a request: client, method and path, status (or "gone"), the
    // response id and tokens of a completion, time to first token, total time.
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    std::string line = fmt::format("{} \"{} {}\" {}", res.remote_address(), std::string(req.method_string()),
                                   std::string(path_of(req)), res.status());
    if (res.failed()) line += " client-gone";
    if (!note.id.empty())
        line += fmt::format(" id={} prompt_tokens={} completion_tokens={}", note.id, note.prompt_tokens,
                            note.completion_tokens);
    if (note.ttft_seconds >= 0) line += fmt::format(" ttft_ms={:.1f}", note.ttft_seconds * 1e3);
    line += fmt::format(" total_ms={:.1f}", total * 1e3);
    spdlog::info("access: {}", line);
}

awaitable<void> OpenAIServer::route(const HttpRequest& req, HttpResponder& res, AccessNote& note) {
    const std::string_view path = path_of(req);
    const unsigned v = req.version();
    const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
    if (path.starts_with("/v1/") && !config_.api_key.empty()) {
        const auto auth = req[http::field::authorization];
        if (std::string_view(auth.data(), auth.size()) != "Bearer " + config_.api_key) {
            { HttpResponse reply = error_response(http::status::unauthorized, "a valid API key is required (Authorization: Bearer ...)", v); co_await res.send(std::move(reply)); }
            co_return;
        }
    }
    auto wrong_method = [&] { return error_response(http::status::method_not_allowed, fmt::format("{} does not take {}", path, std::string(req.method_string())), v); };

    if (path == "/v1/completions" || path == "/v1/chat/completions") {
        if (!post) { HttpResponse reply = wrong_method(); co_await res.send(std::move(reply)); co_return; }
        co_await completions(req, res, path == "/v1/chat/completions", note);
    } else if (path == "/v1/models") {
        { HttpResponse reply = get ? models(v) : wrong_method(); co_await res.send(std::move(reply)); }
    } else if (path == "/tokenize") {
        { HttpResponse reply = post ? tokenize(req) : wrong_method(); co_await res.send(std::move(reply)); }
    } else if (path == "/detokenize") {
        { HttpResponse reply = post ? detokenize(req) : wrong_method(); co_await res.send(std::move(reply)); }
    } else if (path == "/health") {
        HttpResponse r{http::status::ok, v};
        { HttpResponse reply = get ? std::move(r) : wrong_method(); co_await res.send(std::move(reply)); }
    } else if (path == "/ready") {
        if (!get) { HttpResponse reply = wrong_method(); co_await res.send(std::move(reply)); co_return; }
        co_await ready(res);
    } else if (path == "/v1/kv_transfer") {
        HttpResponse r = json_response(
            kv_transfer_info(config_.kv_role, kv_ ? kv_->address() : "", llm_.config().block_size), v);
        { HttpResponse reply = get ? std::move(r) : wrong_method(); co_await res.send(std::move(reply)); }
    } else if (path == "/metrics") {
        HttpResponse r{http::status::ok, v};
        r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        r.body() = metrics_.render(engine_->stats(), config_.served_model_name);
        if (kv_) render_kv_transfer_metrics(r.body(), kv_->stats(), fmt::format("model_name=\"{}\"", config_.served_model_name));
        { HttpResponse reply = get ? std::move(r) : wrong_method(); co_await res.send(std::move(reply)); }
    } else {
        { HttpResponse reply = error_response(http::status::not_found, fmt::format("no route {}", path), v); co_await res.send(std::move(reply)); }
    }
}

HttpResponse OpenAIServer::models(unsigned version) const {
    json::object model{{"id", config_.served_model_name}, {"object", "model"},          {"created", created_},
                       {"owned_by", "minfer"},             {"root", config_.model_root.empty() ? config_.served_model_name : config_.model_root},
                       {"max_model_len", llm_.max_model_len()}};
    return json_response(json::object{{"object", "list"}, {"data", json::array{model}}}, version);
}

std::string OpenAIServer::render_chat(const json::object& body, const ToolRequest& tools, bool add_generation_prompt,
                                      ToolCallFormat& format) const {
    // With tools, the GGUF's tool_use template where it has one.
    const ChatTemplate& tmpl = !tools.tools.empty() && config_.tool_use_template ? *config_.tool_use_template : chat_template_;
    format = config_.tool_call_format.value_or(tool_call_format_of_template(tmpl.source()));
    const json::array messages = messages_for_template(normalize_messages(body.if_contains("messages")), tools,
                                                       tmpl.source().find("tools") != std::string::npos);
    return tmpl.render(messages, add_generation_prompt, tools.tools.empty() ? json::value(nullptr) : json::value(tools.tools));
}

HttpResponse OpenAIServer::tokenize(const HttpRequest& req) {
    const unsigned v = req.version();
    std::string error;
    const auto body = parse_body(req, error);
    if (!body) return error_response(http::status::bad_request, error, v);
    try {
        std::vector<int32_t> ids;
        if (body->contains("messages")) {
            const json::value* agp = body->if_contains("add_generation_prompt");
            const bool add = !agp || !agp->is_bool() || agp->get_bool();
            ToolCallFormat format;
            ids = encode_rendered_chat(tokenizer_, render_chat(*body, parse_tool_request(*body), add, format));
        } else {
            const json::value* prompt = body->if_contains("prompt");
            if (!prompt || !prompt->is_string()) throw RequestError("'prompt' must be a string (or give 'messages')");
            const json::value* special = body->if_contains("add_special_tokens");
            if (special && !special->is_bool()) throw RequestError("'add_special_tokens' must be true or false");
            ids = tokenizer_.encode(std::string_view(prompt->get_string()), !special || special->get_bool());
        }
        return json_response(json::object{{"tokens", json::value_from(ids)},
                                          {"count", ids.size()},
                                          {"max_model_len", llm_.max_model_len()}},
                             v);
    } catch (const std::exception& e) {  // RequestError, ChatTemplateError
        return error_response(http::status::bad_request, e.what(), v);
    }
}

HttpResponse OpenAIServer::detokenize(const HttpRequest& req) {
    const unsigned v = req.version();
    std::string error;
    const auto body = parse_body(req, error);
    if (!body) return error_response(http::status::bad_request, error, v);
    const json::value* tokens = body->if_contains("tokens");
    if (!tokens || !tokens->is_array()) return error_response(http::status::bad_request, "'tokens' must be an array of token ids", v);
    std::vector<int32_t> ids;
    for (const json::value& t : tokens->as_array()) {
        if (!t.is_int64() || t.get_int64() < 0 || t.get_int64() >= tokenizer_.vocab_size())
            return error_response(http::status::bad_request,
                                  fmt::format("'tokens' must hold token ids in 0..{}", tokenizer_.vocab_size() - 1), v);
        ids.push_back(int32_t(t.get_int64()));
    }
    return json_response(json::object{{"prompt", tokenizer_.decode(ids)}}, v);
}

awaitable<void> OpenAIServer::ready(HttpResponder& res) {
    // Ready means the engine really runs: a canary, one greedy token of a
    // one-token prompt, scheduled like any request. A busy engine may not
    // reach it in time; then its step in progress answers: running for less
    // than kStuckStepSeconds is busy (ready), longer is stuck (503). Either
    // way the answer comes within kReadyWait.
    constexpr auto kReadyWait = std::chrono::milliseconds(500);
    constexpr double kStuckStepSeconds = 120;
    auto queue = std::make_shared<OutputQueue>(io_);
    GenerationOptions o;
    o.max_tokens = 1;
    o.sampling.temperature = 0;
    o.ignore_eos = true;
    const int32_t first = tokenizer_.bos_id() >= 0 ? tokenizer_.bos_id() : 0;
    std::string refused;
    uint64_t canary = 0;
    try {
        canary = submit(*engine_, queue, 0, {first}, o);
    } catch (const RequestError& e) {
        refused = e.what();
    }
    const unsigned v = res.version();
    if (!refused.empty()) {
        HttpResponse reply = error_response(http::status::service_unavailable,
                                            "the engine refused a test request: " + refused, v);
        co_await res.send(std::move(reply));
        co_return;
    }
    asio::steady_timer deadline(io_, kReadyWait);
    deadline.async_wait([queue](boost::system::error_code ec) {
        if (!ec) queue->interrupt();
    });
    int32_t tokens = 0;
    bool finished = false;
    while (!finished) {
        std::optional<EngineEvent> e = co_await queue->pop();
        if (!e) break;  // the deadline
        for (const SampleOutput& s : e->output.samples) tokens += int32_t(s.token_ids.size());
        finished = e->output.finished;
    }
    deadline.cancel();
    json::object ok{{"status", "ready"}};
    if (finished) {
        if (tokens != 1) {
            HttpResponse reply =
                error_response(http::status::service_unavailable, "the engine did not generate its test token", v);
            co_await res.send(std::move(reply));
            co_return;
        }
        ok["generated_tokens"] = tokens;
    } else {
        engine_->abort(canary);
        const double in_step = engine_->seconds_in_step();
        if (in_step >= kStuckStepSeconds) {
            HttpResponse reply = error_response(
                http::status::service_unavailable,
                fmt::format("the engine has been in one step for {:.0f} s (stuck past {:.0f} s)", in_step,
                            kStuckStepSeconds),
                v);
            co_await res.send(std::move(reply));
            co_return;
        }
        ok["busy"] = true;  // generating for others: the canary did not get its turn in time
        ok["seconds_in_step"] = in_step;
    }
    HttpResponse r = json_response(ok, v);
    co_await res.send(std::move(r));
}

awaitable<void> OpenAIServer::completions(const HttpRequest& req, HttpResponder& res, bool chat, AccessNote& note) {
    const Clock::time_point arrival = Clock::now();
    const unsigned v = req.version();
    std::string error;
    const auto body = parse_body(req, error);
    if (!body) { HttpResponse reply = error_response(http::status::bad_request, error, v); co_await res.send(std::move(reply)); co_return; }
    if (const json::value* model = body->if_contains("model"); model && !model->is_null()) {
        if (!model->is_string()) { HttpResponse reply = error_response(http::status::bad_request, "'model' must be a string", v); co_await res.send(std::move(reply)); co_return; }
        if (model->get_string() != config_.served_model_name)
            { HttpResponse reply = error_response(
                http::status::not_found, fmt::format("The model `{}` does not exist.", std::string(model->get_string())), v,
                "NotFoundError"); co_await res.send(std::move(reply)); co_return; }
    }

    // ---- what to generate
    CompletionRequest cr;
    ToolRequest tools;
    ToolCallFormat tool_format = ToolCallFormat::Json;
    bool stream = false, include_usage = false;
    std::optional<KVTransferParams> kv_params;
    try {
        if (const json::value* s = body->if_contains("stream"); s && !s->is_null()) {
            if (!s->is_bool()) throw RequestError("'stream' must be true or false");
            stream = s->get_bool();
        }
        if (const json::value* so = body->if_contains("stream_options"); so && !so->is_null()) {
            const json::value* iu = so->is_object() ? so->as_object().if_contains("include_usage") : nullptr;
            if (!so->is_object() || (iu && !iu->is_bool())) throw RequestError("'stream_options' must be {\"include_usage\": true|false}");
            if (!stream) throw RequestError("'stream_options' is only allowed with 'stream': true");
            include_usage = iu && iu->get_bool();
        }
        if (chat) {
            const json::value* agp = body->if_contains("add_generation_prompt");
            if (agp && !agp->is_bool()) throw RequestError("'add_generation_prompt' must be true or false");
            tools = parse_tool_request(*body);
            cr.prompts.push_back(encode_rendered_chat(tokenizer_, render_chat(*body, tools, !agp || agp->get_bool(), tool_format)));
            cr.options = parse_generation_options(
                *body, /*chat=*/true, {"messages", "add_generation_prompt", "tools", "tool_choice", "parallel_tool_calls"},
                &cr.ignored_fields);
            if (!body->contains("max_tokens") && !body->contains("max_completion_tokens")) cr.options.max_tokens = -1;
            if (tools.parses() && cr.options.grammar)
                throw RequestError("a structured output format and 'tools' (tool_choice not \"none\") cannot both constrain the output");
            constrain_tool_calls(tools, tool_format, cr.options, json_options(*body, /*compact_by_default=*/false));
        } else {
            cr = parse_completion_request(*body, tokenizer_);
        }
        kv_params = parse_kv_transfer_params(*body, config_.kv_role, kv_ && !kv_->address().empty());
        if (kv_params) {
            std::erase(cr.ignored_fields, "kv_transfer_params");
            if (cr.prompts.size() != 1) throw RequestError("a request with 'kv_transfer_params' must have one prompt");
            if (kv_params->do_remote_decode) {
                if (stream) throw RequestError("a prefill request ('do_remote_decode') cannot stream");
                if (cr.options.n != 1) throw RequestError("a prefill request ('do_remote_decode') must have n = 1");
                if (!kv_) throw RequestError("this instance sends no KV (it was started without --kv-role)");
                cr.options.kv_send_id = kv_params->transfer_id;
            } else {
                cr.options.kv_receive_id = kv_params->transfer_id;
            }
        }
    } catch (const std::exception& e) {  // RequestError, ChatTemplateError
        error = e.what();
    }
    if (!error.empty()) { HttpResponse reply = error_response(http::status::bad_request, error, v); co_await res.send(std::move(reply)); co_return; }
    if (!cr.ignored_fields.empty())
        spdlog::warn("{}: ignoring unknown field(s) {}", path_of(req), fmt::join(cr.ignored_fields, ", "));

    // ---- admission: a full waiting queue is a 503 the client can retry
    const size_t waiting = engine_->stats().num_waiting + engine_->num_queued();
    if (waiting + cr.prompts.size() > config_.max_waiting) {
        HttpResponse r = error_response(http::status::service_unavailable,
                                        fmt::format("the server has {} requests waiting (--max-waiting {}); retry later",
                                                    waiting, config_.max_waiting), v);
        r.set(http::field::retry_after, "1");
        co_await res.send(std::move(r));
        co_return;
    }

    // ---- submission: each prompt validated here, on the I/O thread, before any is queued
    const size_t n_prompts = cr.prompts.size();
    std::vector<GenerationOptions> options(n_prompts, cr.options);
    try {
        for (size_t i = 0; i < n_prompts; ++i) engine_->validate(cr.prompts[i], options[i]);
    } catch (const RequestError& e) {
        error = e.what();
    }
    if (!error.empty()) { HttpResponse reply = error_response(http::status::bad_request, error, v); co_await res.send(std::move(reply)); co_return; }
    auto queue = std::make_shared<OutputQueue>(io_);
    std::vector<Tracked> tracked(n_prompts);
    try {
        for (size_t i = 0; i < n_prompts; ++i) tracked[i].id = submit(*engine_, queue, i, cr.prompts[i], options[i]);
    } catch (const RequestError& e) {  // the engine is stopping
        error = e.what();
        for (const Tracked& t : tracked)
            if (t.id) engine_->abort(t.id);
    }
    if (!error.empty()) { HttpResponse reply = error_response(http::status::service_unavailable, error, v); co_await res.send(std::move(reply)); co_return; }

    // ---- outputs
    note.id = chat ? random_id("chatcmpl") : random_id("cmpl");
    for (const auto& p : cr.prompts) note.prompt_tokens += int64_t(p.size());
    ResponseBuilder builder(tokenizer_, chat, note.id, unix_now(), config_.served_model_name, cr.options, cr.prompts);
    if (tools.parses()) builder.read_tool_calls(tool_format);
    // A client that leaves, streaming or not, in a prefill or between tokens,
    // frees its sequences at the engine's next step; the outputs of the aborted
    // sequences still come, to close their timings.
    bool client_gone = false;
    size_t unfinished = n_prompts;
    auto abandon = [&] {
        client_gone = true;
        spdlog::info("client gone: aborting {} request(s)", unfinished);
        for (const Tracked& t : tracked)
            if (!t.finished) engine_->abort(t.id);
    };
    if (stream && !co_await res.begin_stream(http::status::ok, "text/event-stream")) abandon();
    if (!client_gone) res.watch_for_close([queue] { queue->interrupt(); });
    while (unfinished > 0) {
        std::optional<EngineEvent> next = co_await queue->pop();
        if (!next) {  // the connection closed
            if (!client_gone) abandon();
            continue;
        }
        EngineEvent& e = *next;
        Tracked& t = tracked[e.prompt_index];
        if (e.output.queue_seconds >= 0) t.timing.queue_seconds = e.output.queue_seconds;
        bool tokens = false;
        for (const SampleOutput& s : e.output.samples) {
            tokens |= !s.token_ids.empty();
            note.completion_tokens += int64_t(s.token_ids.size());
        }
        if (tokens) {
            if (t.timing.ttft_seconds < 0) t.timing.ttft_seconds = std::chrono::duration<double>(e.at - arrival).count();
            if (note.ttft_seconds < 0) note.ttft_seconds = t.timing.ttft_seconds;
            else t.timing.itl_seconds.push_back(std::chrono::duration<double>(e.at - t.last_token).count());
            t.last_token = e.at;
        }
        if (stream && !client_gone) {
            const std::vector<std::string> chunks = builder.stream_chunks(e.prompt_index, e.output);
            for (const std::string& chunk : chunks) {
                if (!co_await res.send_chunk(chunk)) {
                    abandon();
                    break;
                }
            }
        } else {  // not streaming, or nobody listens: keep the choices (finish reasons) up to date
            builder.accumulate(e.prompt_index, e.output);
        }
        if (e.output.finished && !t.finished) {
            t.finished = true;
            --unfinished;
            t.timing.e2e_seconds = std::chrono::duration<double>(e.at - arrival).count();
            t.timing.finish_reason = builder.finish_reason(e.prompt_index);
            metrics_.observe(t.timing);
        }
    }
    if (stream) {
        if (client_gone) co_return;
        if (include_usage) {
            const std::string usage = builder.usage_chunk();
            const bool sent = co_await res.send_chunk(usage);
            if (!sent) co_return;
        }
        const std::string done = "data: [DONE]\n\n";
        const bool sent = co_await res.send_chunk(done);
        if (sent) co_await res.end_stream();
    } else if (kv_params && kv_params->do_remote_decode) {
        if (client_gone) {  // nobody will ask the decode instance: drop the staged prompt
            llm_.staged_kv()->take(kv_params->transfer_id);
            co_return;
        }
        const std::variant<KVSendReport, std::string> sent = co_await send_kv(*kv_params);
        if (const std::string* failure = std::get_if<std::string>(&sent)) {
            spdlog::warn("KV transfer {} to {} failed: {}", kv_params->transfer_id, kv_params->remote_address, *failure);
            HttpResponse reply = error_response(http::status::bad_gateway, "KV transfer failed: " + *failure, v,
                                                "kv_transfer_error");
            co_await res.send(std::move(reply));
            co_return;
        }
        json::object body = builder.response();
        body["kv_transfer_params"] = kv_send_report(kv_params->transfer_id, std::get<KVSendReport>(sent));
        HttpResponse reply = json_response(body, v);
        co_await res.send(std::move(reply));
    } else if (!client_gone) {
        HttpResponse reply = json_response(builder.response(), v);
        co_await res.send(std::move(reply));
    }
}

// The send blocks (the peer, the engine's calls between steps), so it runs on
// kv_pool_; its result comes back to the I/O thread, which wakes the waiter.
awaitable<std::variant<KVSendReport, std::string>> OpenAIServer::send_kv(const KVTransferParams& params) {
    using Result = std::variant<KVSendReport, std::string>;
    auto result = std::make_shared<std::optional<Result>>();
    auto done = std::make_shared<asio::steady_timer>(io_, asio::steady_timer::time_point::max());
    asio::post(kv_pool_, [this, params, result, done] {
        Result r;
        try {
            r = kv_->send(params.transfer_id, params.remote_address);
        } catch (const std::exception& e) {
            r = std::string(e.what());
        }
        asio::post(io_, [result, done, r = std::move(r)]() mutable {
            *result = std::move(r);
            done->cancel();
        });
    });
    while (!*result) {
        boost::system::error_code ec;
        co_await done->async_wait(asio::redirect_error(use_awaitable, ec));
    }
    Result out = std::move(**result);
    co_return out;
}

}  // namespace minfer
