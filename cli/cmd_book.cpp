// minfer book serve | build: the "Learn Kernels" site (book/), served from
// memory or written out as static files. Both render the whole book first, so
// a broken source, glossary or page link stops them with one clear error.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>

#include <cxxopts.hpp>
#include <spdlog/spdlog.h>

#include "book/site/api.h"
#include "book/site/book_index.h"
#include "book/site/site.h"
#include "book/site/site_http.h"
#include "book/site/ask_ai.h"
#include "server/bench/http_stream_client.h"
#include "book/site/source_tree.h"
#include "book/site/static_build.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "server/http/http_server.h"

namespace minfer::cli {

namespace fs = std::filesystem;

namespace {

bool is_repository_root(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / "book" / "content" / "book.json", ec);
}

// --root, or the first folder holding book/content, going up from the binary
// (build/minfer sits in the repository) and then from the working directory.
fs::path find_root(const cxxopts::ParseResult& args) {
    if (args.count("root")) {
        const fs::path root = args["root"].as<std::string>();
        if (!is_repository_root(root)) throw UsageError("--root " + root.string() + " holds no book/content/book.json");
        return fs::absolute(root);
    }
    std::error_code ec;
    for (fs::path start : {fs::read_symlink("/proc/self/exe", ec).parent_path(), fs::current_path(ec)}) {
        for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
            if (is_repository_root(dir)) return dir;
            if (dir == dir.parent_path()) break;
        }
    }
    throw UsageError("cannot find the repository (a folder with book/content/book.json); pass --root DIR");
}

void add_root_option(cxxopts::Options& opts) {
    opts.add_options()("root", "the repository root (default: found from the binary's or the working folder)",
                       cxxopts::value<std::string>());
}

int book_serve(int argc, char** argv) {
    cxxopts::Options opts =
        command_options("book serve", "Serve the book (pages, Markdown twins, source views, API) from memory.");
    // clang-format off
    opts.add_options()
        ("host", "address to listen on", cxxopts::value<std::string>()->default_value("127.0.0.1"))
        ("port", "port to listen on (0: any free port, printed at start)", cxxopts::value<int32_t>()->default_value("8080"))
        ("rate-limit", "API requests per minute per client address", cxxopts::value<double>()->default_value("60"))
        ("rate-burst", "API requests a client may make at once", cxxopts::value<double>()->default_value("30"))
        ("ask-ai-url", "turn Ask AI on: the OpenAI-compatible server that answers readers' questions, e.g. a "
                       "`minfer serve` at http://127.0.0.1:8000 (the privacy page says what is sent)",
         cxxopts::value<std::string>())
        ("ask-ai-model", "the `model` to ask for (default: the server's)", cxxopts::value<std::string>())
        ("ask-ai-context-chars", "characters of the page's Markdown sent with a question",
         cxxopts::value<int32_t>()->default_value("6000"))
        ("ask-ai-max-tokens", "longest answer, in tokens", cxxopts::value<int32_t>()->default_value("256"));
    // clang-format on
    add_root_option(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv);
    const std::string host = args["host"].as<std::string>();
    boost::system::error_code ec;
    asio::ip::make_address(host, ec);
    if (ec) throw UsageError("--host must be an IP address, got '" + host + "'");
    const int32_t port = int_option(args, "port", 0, 65535);
    book::ApiOptions api_options;
    api_options.requests_per_minute = args["rate-limit"].as<double>();
    api_options.burst = args["rate-burst"].as<double>();
    if (!(api_options.requests_per_minute > 0)) throw UsageError("--rate-limit must be > 0");
    if (!(api_options.burst >= 1)) throw UsageError("--rate-burst must be >= 1");

    const fs::path root = find_root(args);
    const book::Book book = book::load_book(root);
    const book::SourceTree tree = book::SourceTree::scan(root);
    const book::Site site(book, tree);
    book::BookApi api(book, api_options);
    book::AskAiOptions ask_options;
    if (args.count("ask-ai-url")) {
        ask_options.url = args["ask-ai-url"].as<std::string>();
        try {
            bench::parse_url(ask_options.url);
        } catch (const std::invalid_argument& e) {
            throw UsageError(std::string("--ask-ai-url: ") + e.what());
        }
    }
    if (args.count("ask-ai-model")) ask_options.model = args["ask-ai-model"].as<std::string>();
    ask_options.context_chars = size_t(int_option(args, "ask-ai-context-chars", 1, 1 << 20));
    ask_options.max_tokens = int_option(args, "ask-ai-max-tokens", 1, 1 << 16);
    const book::AskAi ask(book, site, ask_options);
    book::SiteHandler handler(site, &api, &ask);

    asio::io_context io;
    HttpLimits limits;
    limits.max_body_bytes = 1u << 20;  // the API's JSON-RPC bodies are small
    std::unique_ptr<HttpServer> server;
    try {
        server = std::make_unique<HttpServer>(
            io, host, uint16_t(port), limits,
            [&handler](const HttpRequest& req, HttpResponder& res) { return handler.handle(req, res); },
            book::plain_response);
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + e.code().message());
    }
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& error, int) {
        if (!error) server->drain([&io] { io.stop(); });
    });
    server->start();
    // The bound port on stdout, for scripts that asked for port 0.
    std::printf("minfer book serve: listening on http://%s:%u (%zu pages and assets, %zu source files)\n", host.c_str(),
                unsigned(server->port()), site.resources().size(), tree.files().size());
    std::fflush(stdout);
    io.run();
    return 0;
}

int book_build(int argc, char** argv) {
    cxxopts::Options opts = command_options("book build", "Write the book as a static site; fails on any broken link.");
    // clang-format off
    opts.add_options()
        ("out", "the folder to write into (created if missing)", cxxopts::value<std::string>())
        ("base-url", "absolute URL the site will live at, for llms.txt (default: site-relative links)",
         cxxopts::value<std::string>()->default_value(""));
    // clang-format on
    add_root_option(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv);
    if (!args.count("out") || args["out"].as<std::string>().empty()) throw UsageError("--out DIR is required");
    std::string base_url = args["base-url"].as<std::string>();
    while (base_url.ends_with('/')) base_url.pop_back();
    if (!base_url.empty() && !base_url.starts_with("http://") && !base_url.starts_with("https://"))
        throw UsageError("--base-url must start with http:// or https://");

    const fs::path root = find_root(args);
    const book::Book book = book::load_book(root);
    const book::SourceTree tree = book::SourceTree::scan(root);
    const book::Site site(book, tree);
    const fs::path out = args["out"].as<std::string>();
    const size_t files = book::write_static_site(site, out, base_url);
    std::printf("minfer book build: wrote %zu files to %s\n", files, out.string().c_str());
    return 0;
}

}  // namespace

int cmd_book(int argc, char** argv) {
    const std::string usage =
        "usage: minfer book serve [--port 8080] [--host 127.0.0.1] [--root DIR] [--rate-limit N] [--rate-burst B]\n"
        "       minfer book build --out DIR [--root DIR] [--base-url URL]\n";
    if (argc < 2) throw UsageError("name a book command: serve or build\n" + usage);
    const std::string sub = argv[1];
    if (sub == "serve") return book_serve(argc - 1, argv + 1);
    if (sub == "build") return book_build(argc - 1, argv + 1);
    if (sub == "--help" || sub == "-h") {
        std::printf("%s", usage.c_str());
        return 0;
    }
    throw UsageError("unknown book command '" + sub + "'\n" + usage);
}

}  // namespace minfer::cli
