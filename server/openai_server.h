// `minfer serve`: the OpenAI-compatible API over an EngineThread.
//
//   POST /v1/completions, /v1/chat/completions   (stream: SSE `data:` chunks, then `data: [DONE]`)
//   GET  /v1/models
//   POST /tokenize, /detokenize                  (vLLM's shapes)
//   GET  /health (the process answers), /ready (the engine generates a token), /metrics (Prometheus)
//
// A request's life: the I/O thread parses and validates it (the engine's own
// checks included: context length, parameters), submits one engine request
// per prompt, each getting its id at once, and then awaits the outputs the engine thread pushes
// into the request's OutputQueue; a streaming client that goes away aborts its
// engine requests, so their KV blocks are freed.
#pragma once

#include <boost/asio.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "engine/text/chat/chat_template.h"
#include "engine/core/engine_thread.h"
#include "server/http/http_server.h"
#include "server/kv_transfer_api.h"
#include "server/metrics.h"
#include "server/tool_calls.h"

namespace minfer {

struct ServerConfig {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;
    std::string served_model_name;    // what `model` must say; the file's stem by default
    std::string model_root;           // /v1/models' `root`, as vLLM's: the model file (absolute path)
    std::string api_key;              // non-empty: /v1 routes need "Authorization: Bearer KEY"
    size_t max_waiting = 1024;        // more waiting requests than this: 503 with Retry-After
    bool access_log = false;          // one log line a request: id, client, status, tokens, times
    HttpLimits http;
    std::optional<ChatTemplate> tool_use_template;     // the GGUF's tokenizer.chat_template.tool_use
    std::optional<ToolCallFormat> tool_call_format;    // --tool-call-parser; nullopt: from the template
    // Disaggregation (kv_transfer_api.h): the role, and how this instance
    // sends and receives KV; no kv_transfer: requests may not name one.
    KVRole kv_role = KVRole::Both;
    std::optional<KVTransferOptions> kv_transfer;
};

class OpenAIServer {
public:
    OpenAIServer(LLMEngine& engine, const ChatTemplate& chat_template, ServerConfig config);
    ~OpenAIServer();

    uint16_t port() const { return http_->port(); }
    // Where this instance receives KV ("" if it does not).
    std::string kv_address() const { return kv_ ? kv_->address() : ""; }
    // Serves until SIGINT or SIGTERM (or stop()), then lets the requests in
    // flight finish and returns.
    void run();
    void stop();  // from any thread: the same as a signal

private:
    // What the access log says of a completion request beyond the HTTP side.
    struct AccessNote {
        std::string id;             // the response id (cmpl-..., chatcmpl-...)
        int64_t prompt_tokens = 0;
        int64_t completion_tokens = 0;
        double ttft_seconds = -1;
    };
    asio::awaitable<void> handle(const HttpRequest& req, HttpResponder& res);
    asio::awaitable<void> route(const HttpRequest& req, HttpResponder& res, AccessNote& note);
    asio::awaitable<void> completions(const HttpRequest& req, HttpResponder& res, bool chat, AccessNote& note);
    asio::awaitable<void> ready(HttpResponder& res);
    HttpResponse tokenize(const HttpRequest& req);
    // A chat request's prompt text: its messages (and tools) through the chat
    // template, the tool_use one when tools are given and the model has one;
    // `format` is how that template's model writes calls.
    std::string render_chat(const boost::json::object& body, const ToolRequest& tools, bool add_generation_prompt,
                            ToolCallFormat& format) const;
    HttpResponse detokenize(const HttpRequest& req);
    HttpResponse models(unsigned version) const;
    // A prefill instance's request is done: its KV goes to the decode instance
    // (on kv_pool_, off the I/O thread); the report, or the error.
    asio::awaitable<std::variant<KVSendReport, std::string>> send_kv(const KVTransferParams& params);

    LLMEngine& llm_;
    const Tokenizer& tokenizer_;
    const ChatTemplate& chat_template_;
    ServerConfig config_;
    asio::io_context io_;
    std::unique_ptr<EngineThread> engine_;
    std::unique_ptr<KVTransfer> kv_;   // with config_.kv_transfer
    asio::thread_pool kv_pool_{4};     // KV sends block: they run here
    std::unique_ptr<HttpServer> http_;
    ServerMetrics metrics_;
    int64_t created_ = 0;       // unix time of start, for /v1/models
    uint64_t next_id_ = 1;      // response ids (cmpl-N, chatcmpl-N)
};

}  // namespace minfer
