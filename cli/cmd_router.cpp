// minfer router: the OpenAI-compatible proxy in front of prefill and decode
// instances (server/router/).
#include <cxxopts.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "server/bench/http_stream_client.h"
#include "server/router/router_server.h"

namespace minfer::cli {

namespace {

// `--prefill A B --decode C` as SGLang's router takes it (several URLs after
// one flag), rewritten as `--prefill A --prefill B --decode C` for cxxopts.
std::vector<std::string> spread_url_lists(int argc, char** argv) {
    std::vector<std::string> out{argv[0]};
    std::string list_flag;  // the flag whose URLs are being read, "" outside one
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--prefill" || arg == "--decode") {
            list_flag = arg;
            out.push_back(arg);
            if (i + 1 < argc) out.push_back(argv[++i]);  // its first value, whatever it looks like
            continue;
        }
        if (!list_flag.empty() && !arg.starts_with("-")) {
            out.push_back(list_flag);
        } else {
            list_flag.clear();
        }
        out.push_back(arg);
    }
    return out;
}

std::vector<std::string> instance_urls(const cxxopts::ParseResult& args, const std::string& flag) {
    if (!args.count(flag)) throw UsageError(fmt::format("--{} is required: at least one instance URL", flag));
    std::vector<std::string> urls = args[flag].as<std::vector<std::string>>();
    for (std::string& url : urls) {
        try {
            bench::parse_url(url);
        } catch (const std::exception& e) {
            throw UsageError(fmt::format("--{}: {}", flag, e.what()));
        }
        while (url.ends_with("/")) url.pop_back();
        if (std::count(urls.begin(), urls.end(), url) > 1)
            throw UsageError(fmt::format("--{} names {} twice", flag, url));
    }
    return urls;
}

// A number of seconds > 0 (fractions allowed: tests check health often).
std::chrono::milliseconds seconds_option(const cxxopts::ParseResult& args, const std::string& name) {
    const std::string text = args[name].as<std::string>();
    try {
        size_t used = 0;
        const double s = std::stod(text, &used);
        if (used == text.size() && std::isfinite(s) && s >= 0.001 && s <= 1e6)
            return std::chrono::milliseconds(int64_t(std::llround(s * 1000)));
    } catch (const std::exception&) {
    }
    throw UsageError(fmt::format("--{} must be a number of seconds > 0, got '{}'", name, text));
}

}  // namespace

int cmd_router(int argc, char** argv) {
    cxxopts::Options opts = command_options(
        "router",
        "OpenAI-compatible proxy for prefill/decode disaggregation: each request to /v1/completions or\n"
        "/v1/chat/completions is prefilled on a prefill instance, which sends its KV to a decode instance,\n"
        "which generates the answer. Instances are `minfer serve` processes with the KV-transfer role of\n"
        "their flag; failed ones are taken out and retried by health checks. Also /v1/models (from a decode\n"
        "instance), /health and /metrics. SIGINT/SIGTERM finish the requests in flight, then exit.",
        "--prefill URL [URL...] --decode URL [URL...] [options]");
    // clang-format off
    opts.add_options()
        ("prefill", "prefill instances' base URLs (http://HOST:PORT)", cxxopts::value<std::vector<std::string>>())
        ("decode", "decode instances' base URLs (http://HOST:PORT)", cxxopts::value<std::vector<std::string>>())
        ("host", "address to listen on", cxxopts::value<std::string>()->default_value("127.0.0.1"))
        ("port", "port to listen on (0: any free port, printed at start)", cxxopts::value<int32_t>()->default_value("8000"))
        ("policy", "how an instance is picked: round-robin, or least-loaded (fewest of the router's requests in flight)",
         cxxopts::value<std::string>()->default_value("round-robin"))
        ("api-key", "require Authorization: Bearer KEY on /v1 routes, and send it to the instances "
                    "(default: $MINFER_API_KEY)", cxxopts::value<std::string>())
        ("health-interval", "seconds between health checks of every instance", cxxopts::value<std::string>()->default_value("2"))
        ("request-timeout", "seconds each request to an instance may take, a whole stream included",
         cxxopts::value<std::string>()->default_value("600"))
        ("log-level", "debug, info, warn or error", cxxopts::value<std::string>()->default_value("info"));
    // clang-format on
    std::vector<std::string> spread = spread_url_lists(argc, argv);
    std::vector<char*> spread_argv;
    for (std::string& s : spread) spread_argv.push_back(s.data());
    const cxxopts::ParseResult args = parse_command(opts, int(spread_argv.size()), spread_argv.data());

    router::RouterConfig rc;
    rc.prefill_urls = instance_urls(args, "prefill");
    rc.decode_urls = instance_urls(args, "decode");
    rc.host = args["host"].as<std::string>();
    boost::system::error_code ec;
    boost::asio::ip::make_address(rc.host, ec);
    if (ec) throw UsageError("--host must be an IP address, got '" + rc.host + "'");
    rc.port = uint16_t(int_option(args, "port", 0, 65535));
    const std::string policy = args["policy"].as<std::string>();
    if (policy == "round-robin") rc.policy = router::Policy::round_robin;
    else if (policy == "least-loaded") rc.policy = router::Policy::least_loaded;
    else throw UsageError("--policy must be round-robin or least-loaded, got '" + policy + "'");
    if (args.count("api-key")) rc.api_key = args["api-key"].as<std::string>();
    else if (const char* key = std::getenv("MINFER_API_KEY")) rc.api_key = key;
    rc.health_interval = seconds_option(args, "health-interval");
    rc.request_timeout = std::chrono::ceil<std::chrono::seconds>(seconds_option(args, "request-timeout"));
    // The log on stderr: the first health checks log before the listening
    // line, which must be stdout's first for scripts that read the port.
    spdlog::set_default_logger(spdlog::stderr_color_mt("router"));
    const std::string level = args["log-level"].as<std::string>();
    const auto lvl = spdlog::level::from_str(level);
    if (lvl == spdlog::level::off && level != "off") throw UsageError("--log-level must be debug, info, warn or error");
    spdlog::set_level(lvl);

    std::unique_ptr<router::RouterServer> server;
    try {
        server = std::make_unique<router::RouterServer>(rc);
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", rc.host, rc.port, e.code().message()));
    }
    server->run([&] {
        // The bound port on stdout, for scripts that asked for port 0: once
        // the first health checks are done, so a request sent at once finds
        // the instances that are up.
        std::printf("minfer router: listening on http://%s:%u\n", rc.host.c_str(), unsigned(server->port()));
        std::fflush(stdout);
    });
    spdlog::info("stopped");
    return 0;
}

}  // namespace minfer::cli
