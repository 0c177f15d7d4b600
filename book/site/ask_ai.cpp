#include "book/site/ask_ai.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "book/site/http_util.h"
#include "book/site/page_layout.h"
#include "book/site/site.h"
#include "server/bench/http_stream_client.h"

namespace minfer::book {

namespace json = boost::json;
using asio::use_awaitable;

namespace {

constexpr size_t kMaxQuestionChars = 2000;
constexpr auto kAnswerTimeout = std::chrono::seconds(120);

// The page at `path`: its title, or nullopt when the book has no such page.
std::optional<std::string> page_title(const Book& book, std::string_view path) {
    for (const Chapter& c : book.chapters) {
        if (chapter_path(c) == path) return c.title;
        for (const Section& s : c.sections)
            if (section_path(c, s) == path) return s.title;
    }
    if (path == "/chapters/glossary") return std::string("Glossary");
    if (path == "/chapters/reading") return std::string("Further reading");
    for (const Page& p : book.pages)
        if ("/" + p.slug == path) return p.title;
    return std::nullopt;
}

// One SSE event of the OpenAI stream ("data: {...}"): the text it adds, if any.
std::string delta_of(std::string_view event) {
    if (!event.starts_with("data: ")) return "";
    event.remove_prefix(6);
    if (event == "[DONE]") return "";
    boost::system::error_code ec;
    const json::value v = json::parse(event, ec);
    if (ec || !v.is_object()) return "";
    const json::value* choices = v.as_object().if_contains("choices");
    if (!choices || !choices->is_array() || choices->as_array().empty()) return "";
    const json::value& c = choices->as_array()[0];
    const json::value* delta = c.is_object() ? c.as_object().if_contains("delta") : nullptr;
    const json::value* content = delta && delta->is_object() ? delta->as_object().if_contains("content") : nullptr;
    return content && content->is_string() ? std::string(content->as_string()) : "";
}

// What the upstream request hands the answering coroutine, on the same thread.
struct Pipe {
    explicit Pipe(asio::io_context& io) : wake(io, asio::steady_timer::time_point::max()) {}
    std::string pending;  // SSE bytes not yet forwarded
    bool done = false;
    std::string error;
    asio::steady_timer wake;
};

std::string event(const json::object& o) { return "data: " + json::serialize(o) + "\n\n"; }

// At most `bytes` bytes of `text`, not cutting a UTF-8 character in two.
std::string utf8_prefix(std::string_view text, size_t bytes) {
    if (text.size() <= bytes) return std::string(text);
    while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
    return std::string(text.substr(0, bytes));
}


// The answering server's stream into `pipe`. A function, not a lambda: a
// coroutine's parameters live in its frame, a lambda's captures do not.
asio::awaitable<void> fetch_answer(std::shared_ptr<bench::HttpClient> client, std::shared_ptr<Pipe> pipe,
                                   std::string request_body) {
    // Every argument named first: GCC 12 mishandles temporaries that live across a suspension.
    std::string method = "POST", target = "/v1/chat/completions";
    std::function<void(std::string_view)> on_body = [pipe](std::string_view bytes) {
        pipe->pending.append(bytes);
        pipe->wake.cancel();
    };
    const bench::HttpResult r =
        co_await client->request(std::move(method), std::move(target), std::move(request_body), kAnswerTimeout,
                                 std::move(on_body));
    if (r.status != 200)
        pipe->error = r.status == 0 ? "the answering server did not answer: " + r.error
                                    : fmt::format("the answering server said {}: {}", r.status, utf8_prefix(r.body, 300));
    pipe->done = true;
    pipe->wake.cancel();
}

}  // namespace

json::array ask_ai_messages(const std::string& page_title, const std::string& page_url,
                            const std::string& page_markdown, const std::vector<const GlossaryEntry*>& terms,
                            const std::string& question) {
    std::string context = "Page \"" + page_title + "\" (" + page_url + "):\n\n" + page_markdown + "\n";
    if (!terms.empty()) {
        context += "\nGlossary entries:\n";
        for (const GlossaryEntry* g : terms) context += "- " + g->term + ": " + g->definition + "\n";
    }
    return {json::object{{"role", "system"},
                         {"content", "Answer the reader's question about this page of the book Learn Kernels, "
                                     "briefly; say so if the page does not answer it."}},
            json::object{{"role", "user"}, {"content", context + "\nQuestion: " + question}}};
}

AskAi::AskAi(const Book& book, const Site& site, AskAiOptions options)
    : book_(book), site_(site), options_(std::move(options)) {}

asio::awaitable<void> AskAi::handle(const HttpRequest& req, HttpResponder& res) const {
    const json::array sends{"the question", fmt::format("the page's Markdown, its first {} characters", options_.context_chars),
                            "the glossary entries it names"};
    if (req.method() == http::verb::get) {
        json::object info{{"enabled", !options_.url.empty()}, {"sends", sends}};
        if (!options_.url.empty()) info["model"] = options_.model.empty() ? "the server's default" : options_.model;
        HttpResponse reply = no_store_json(req, http::status::ok, info);
        co_await res.send(std::move(reply));
        co_return;
    }
    if (req.method() != http::verb::post) {
        HttpResponse reply = no_store_json(req, http::status::method_not_allowed, {{"error", "GET or POST /api/ask"}});
        reply.set(http::field::allow, "GET, POST");
        co_await res.send(std::move(reply));
        co_return;
    }
    if (options_.url.empty()) {
        HttpResponse reply = no_store_json(req, http::status::service_unavailable,
                                         {{"error", "Ask AI is off on this server (minfer book serve --ask-ai-url URL turns it on)"}});
        co_await res.send(std::move(reply));
        co_return;
    }
    // ---- the question
    boost::system::error_code ec;
    const json::value body = json::parse(req.body(), ec);
    const json::object* o = !ec && body.is_object() ? &body.as_object() : nullptr;
    const json::value* page = o ? o->if_contains("page") : nullptr;
    const json::value* question = o ? o->if_contains("question") : nullptr;
    std::string problem;
    if (!o) problem = "the body must be a JSON object {\"page\": ..., \"question\": ...}";
    else if (!page || !page->is_string()) problem = "'page' must be the path of a page of the book";
    else if (!question || !question->is_string() || question->as_string().empty() ||
             question->as_string().size() > kMaxQuestionChars)
        problem = fmt::format("'question' must be a string of 1 to {} characters", kMaxQuestionChars);
    const std::string path = page && page->is_string() ? std::string(page->as_string()) : "";
    const std::optional<std::string> title = problem.empty() ? page_title(book_, path) : std::nullopt;
    const Resource* twin = title ? site_.find(PageLayout::markdown_url(path)) : nullptr;
    if (problem.empty() && !twin) problem = "no page " + path + " in the book";
    if (!problem.empty()) {
        HttpResponse reply = no_store_json(req, http::status::bad_request, {{"error", problem}});
        co_await res.send(std::move(reply));
        co_return;
    }
    const std::string q(question->as_string());
    const std::string excerpt = utf8_prefix(twin->body, options_.context_chars);
    // Glossary entries the question or the excerpt names, while they fit the same budget of characters.
    std::vector<const GlossaryEntry*> terms;
    const std::string haystack = ascii_lower(q + " " + excerpt);
    size_t budget = options_.context_chars - std::min(options_.context_chars, excerpt.size());
    for (const GlossaryEntry& g : book_.glossary) {
        const size_t cost = g.term.size() + g.definition.size() + 4;
        if (cost > budget || haystack.find(ascii_lower(g.term)) == std::string::npos) continue;
        terms.push_back(&g);
        budget -= cost;
    }
    json::array sources{json::object{{"title", *title}, {"url", path}}};
    for (const GlossaryEntry* g : terms)
        sources.push_back(json::object{{"title", g->term}, {"url", "/chapters/glossary#" + g->id}});

    // ---- the answer, streamed as it comes
    asio::io_context& io = static_cast<asio::io_context&>(asio::query(co_await asio::this_coro::executor,
                                                                      asio::execution::context));
    json::object upstream{{"messages", ask_ai_messages(*title, path, excerpt, terms, q)},
                          {"stream", true},
                          {"max_tokens", options_.max_tokens},
                          {"temperature", 0.2}};
    if (!options_.model.empty()) upstream["model"] = options_.model;
    auto pipe = std::make_shared<Pipe>(io);
    auto client = std::make_shared<bench::HttpClient>(io, bench::parse_url(options_.url), "");
    asio::co_spawn(io, fetch_answer(client, pipe, json::serialize(upstream)), asio::detached);

    const std::string event_stream = "text/event-stream";
    bool open = co_await res.begin_stream(http::status::ok, event_stream);
    const std::string first = event({{"sources", sources}});
    if (open) open = co_await res.send_chunk(first);
    while (open) {
        size_t end;
        while (open && (end = pipe->pending.find("\n\n")) != std::string::npos) {
            const std::string text = delta_of(std::string_view(pipe->pending).substr(0, end));
            pipe->pending.erase(0, end + 2);
            const std::string chunk = event({{"delta", text}});
            if (!text.empty()) open = co_await res.send_chunk(chunk);
        }
        if (!open || pipe->done) break;
        pipe->wake.expires_at(asio::steady_timer::time_point::max());
        boost::system::error_code wait_ec;
        co_await pipe->wake.async_wait(asio::redirect_error(use_awaitable, wait_ec));
    }
    if (!open) co_return;  // the reader left; the upstream answer ends by itself (max_tokens)
    if (!pipe->error.empty()) {
        const std::string failure = event({{"error", pipe->error}});
        const bool failed_sent = co_await res.send_chunk(failure);
        if (!failed_sent) co_return;
    }
    const std::string done = "data: [DONE]\n\n";  // named: GCC 12 cannot await a call given a literal
    const bool sent = co_await res.send_chunk(done);
    if (sent) co_await res.end_stream();
}

}  // namespace minfer::book
