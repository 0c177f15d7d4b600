// Ask AI: a reader's question about the page they are on, answered by an
// OpenAI-compatible server (by default a `minfer serve` the reader runs).
// Off unless `minfer book serve --ask-ai-url URL` names one.
//
//   GET  /api/ask   {"enabled": bool, "model": ..., "sends": [what a question sends]}
//   POST /api/ask   {"page": "/chapters/...", "question": "..."}
//                   -> text/event-stream: {"sources": [{title, url}]}, then
//                      {"delta": "..."} as the answer comes, then [DONE];
//                      {"error": "..."} if the answering server fails.
//
// What goes to that server, and nothing else: the question, the page's
// Markdown (its first context_chars characters), and the glossary entries
// whose terms the question or that text names (privacy.md says so).
#pragma once

#include <boost/json.hpp>
#include <optional>
#include <string>

#include "book/site/book_index.h"
#include "server/http/http_server.h"

namespace minfer::book {

class Site;

struct AskAiOptions {
    std::string url;               // the OpenAI-compatible server's base URL; empty: Ask AI is off
    std::string model;             // what to send as `model` (empty: the server's first)
    size_t context_chars = 6000;   // of the page's Markdown
    int max_tokens = 256;
};

// The chat messages for one question (exposed for tests).
boost::json::array ask_ai_messages(const std::string& page_title, const std::string& page_url,
                                   const std::string& page_markdown, const std::vector<const GlossaryEntry*>& terms,
                                   const std::string& question);

class AskAi {
public:
    AskAi(const Book& book, const Site& site, AskAiOptions options);
    // Answers GET and POST /api/ask; other methods get 405.
    asio::awaitable<void> handle(const HttpRequest& request, HttpResponder& responder) const;

private:
    const Book& book_;
    const Site& site_;
    AskAiOptions options_;
};

}  // namespace minfer::book
