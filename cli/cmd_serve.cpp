// minfer serve: the OpenAI-compatible HTTP server (server/).
#include <cxxopts.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "engine/text/chat/chat_template.h"
#include "cli/cli_common.h"
#include "cli/parallel.h"
#include "cli/commands.h"
#include "engine/model/model.h"
#include "engine/text/tokenizer.h"
#include "server/openai_server.h"

namespace minfer::cli {

int cmd_serve(int argc, char** argv) {
    cxxopts::Options opts = command_options(
        "serve",
        "OpenAI-compatible server: /v1/completions, /v1/chat/completions, /v1/models, /tokenize,\n"
        "/detokenize, /health, /ready, /metrics. SIGINT/SIGTERM finish the requests in flight, then exit.",
        "[MODEL] [options]");
    add_model_file_option(opts);
    // clang-format off
    opts.add_options()
        ("host", "address to listen on", cxxopts::value<std::string>()->default_value("127.0.0.1"))
        ("port", "port to listen on (0: any free port, printed at start)", cxxopts::value<int32_t>()->default_value("8000"))
        ("served-model-name", "the model name clients send (default: the file name without .gguf)", cxxopts::value<std::string>())
        ("api-key", "require Authorization: Bearer KEY on /v1 routes (default: $MINFER_API_KEY)", cxxopts::value<std::string>())
        ("chat-template", "FILE or built-in NAME (chatml, llama2, llama3, gemma) instead of the model's template",
         cxxopts::value<std::string>()->default_value(""))
        ("tool-call-parser", "how the model writes tool calls: hermes, llama3_json, mistral, json, or auto "
                             "(from the chat template's markers)", cxxopts::value<std::string>()->default_value("auto"))
        ("max-body-bytes", "largest request body (K/M/G suffixes)", cxxopts::value<std::string>()->default_value("8M"))
        ("max-waiting", "waiting requests beyond which new ones get 503", cxxopts::value<int32_t>()->default_value("1024"))
        ("access-log", "log one line a request: client, method and path, status, response id, tokens, "
                       "time to first token, total time")
        ("timeout-keep-alive", "seconds an idle keep-alive connection stays open", cxxopts::value<int32_t>()->default_value("60"))
        ("log-level", "debug, info, warn or error", cxxopts::value<std::string>()->default_value("info"))
        ("kv-role", "prefill/decode disaggregation: prefill (compute prompts, send their KV), decode (receive KV, "
                    "generate) or both (today's single instance; it may do either)", cxxopts::value<std::string>())
        ("kv-transfer-port", "receive KV over TCP on this port (0: any free one; GET /v1/kv_transfer says which). "
                             "Under mpirun, instances also reach each other over MPI", cxxopts::value<int32_t>())
        ("kv-transfer-timeout", "seconds a KV transfer may wait for its peer, and received blocks for their "
                                "request, before they are given up", cxxopts::value<double>()->default_value("30"));
    // clang-format on
    add_synthetic_option(opts);
    add_engine_options(opts);
    add_parallel_options(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"}, {"", "engine", "speculative decoding", "parallelism"});

    ServerConfig sc;
    sc.host = args["host"].as<std::string>();
    sc.port = uint16_t(int_option(args, "port", 0, 65535));
    sc.http.max_body_bytes = parse_bytes(args["max-body-bytes"].as<std::string>(), "--max-body-bytes");
    if (sc.http.max_body_bytes == 0) throw UsageError("--max-body-bytes must be > 0");
    sc.max_waiting = size_t(int_option(args, "max-waiting", 1));
    sc.access_log = args.count("access-log") > 0;
    sc.http.idle_timeout = std::chrono::seconds(int_option(args, "timeout-keep-alive", 1));
    if (args.count("api-key")) sc.api_key = args["api-key"].as<std::string>();
    else if (const char* key = std::getenv("MINFER_API_KEY")) sc.api_key = key;
    boost::system::error_code ec;
    boost::asio::ip::make_address(sc.host, ec);
    if (ec) throw UsageError("--host must be an IP address, got '" + sc.host + "'");

    if (const std::string parser = args["tool-call-parser"].as<std::string>(); parser != "auto") {
        sc.tool_call_format = tool_call_format_named(parser);
        if (!sc.tool_call_format) throw UsageError("--tool-call-parser must be hermes, llama3_json, mistral, json or auto");
    }
    const std::string level = args["log-level"].as<std::string>();
    const auto lvl = spdlog::level::from_str(level);
    if (lvl == spdlog::level::off && level != "off") throw UsageError("--log-level must be debug, info, warn or error");
    spdlog::set_level(lvl);

    EngineConfig config = engine_config_from(args);
    const bool disaggregated = args.count("kv-role") > 0;
    if (disaggregated) {
        try {
            sc.kv_role = parse_kv_role(args["kv-role"].as<std::string>());
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    if (args.count("kv-transfer-port") && !disaggregated) throw UsageError("--kv-transfer-port needs --kv-role");
    const double kv_timeout = args["kv-transfer-timeout"].as<double>();
    if (!(kv_timeout > 0 && kv_timeout <= 86400)) throw UsageError("--kv-transfer-timeout must be in (0, 86400] seconds");
    config.kv_transfer_timeout = kv_timeout;
    ModelLaunch launch = launch_model(args, &config, disaggregated);
    if (disaggregated) {
        KVTransferOptions kv;
        kv.listen_host = sc.host;
        kv.timeout = std::chrono::milliseconds(int64_t(kv_timeout * 1000));
        if (args.count("kv-transfer-port")) {
            const int32_t p = args["kv-transfer-port"].as<int32_t>();
            if (p < 0 || p > 65535) throw UsageError("--kv-transfer-port must be in 0..65535");
            if (sc.kv_role == KVRole::Prefill) throw UsageError("a prefill instance receives no KV: drop --kv-transfer-port");
            kv.tcp_port = p;
        }
        kv.receive = sc.kv_role != KVRole::Prefill;
        if (launch.instances) {
            kv.mpi = true;
            kv.mpi_rank = launch.instances->world().rank;
        }
        if (sc.kv_role == KVRole::Decode && kv.tcp_port < 0 && !kv.mpi)
            throw UsageError("a decode instance receives KV over TCP (--kv-transfer-port) or MPI (launch it under mpirun)");
        sc.kv_transfer = kv;
    }
    if (launch.worker_exit) return *launch.worker_exit;  // ranks > 0 of mpirun end here
    const auto& backend = launch.backend;
    const auto& model = launch.model;
    if (args.count("served-model-name")) {
        sc.served_model_name = args["served-model-name"].as<std::string>();
        if (sc.served_model_name.empty()) throw UsageError("--served-model-name must not be empty");
    } else {
        sc.served_model_name = args.count("synthetic") ? args["synthetic"].as<std::string>()
                                                       : std::filesystem::path(args["model"].as<std::string>()).stem().string();
    }
    sc.model_root = args.count("synthetic")
                        ? "synthetic:" + args["synthetic"].as<std::string>()
                        : std::filesystem::absolute(args["model"].as<std::string>()).string();
    auto tokenizer = Tokenizer::from_gguf(model->file());
    const auto draft_model = load_draft_model(config.speculative, *backend, *tokenizer);
    const ChatTemplate chat = chat_template_of(*model, *tokenizer, args["chat-template"].as<std::string>());
    if (args["chat-template"].as<std::string>().empty() && model->file().has("tokenizer.chat_template.tool_use"))
        sc.tool_use_template = ChatTemplate::from_source(model->file().get_string("tokenizer.chat_template.tool_use"),
                                                         chat.bos_token(), chat.eos_token());
    std::unique_ptr<LLMEngine> engine = make_engine(*model, *tokenizer, config, draft_model.get());
    std::unique_ptr<OpenAIServer> server;
    try {
        server = std::make_unique<OpenAIServer>(*engine, chat, sc);
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error(fmt::format("cannot listen on {}:{}: {}", sc.host, sc.port, e.code().message()));
    }
    // The bound port on stdout, for scripts that asked for port 0.
    const std::string kv_note =
        disaggregated ? fmt::format(" (kv-role {}{})", kv_role_name(sc.kv_role),
                                    server->kv_address().empty() ? "" : ", KV at " + server->kv_address())
                      : "";
    std::printf("minfer serve: listening on http://%s:%u%s\n", sc.host.c_str(), unsigned(server->port()),
                kv_note.c_str());
    std::fflush(stdout);
    server->run();
    spdlog::info("stopped");
    return 0;
}

}  // namespace minfer::cli
