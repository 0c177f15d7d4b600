// minfer run: generate text for one prompt.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <regex>
#include <unistd.h>

#include <iostream>

#include "engine/text/chat/chat_template.h"
#include "engine/text/chat_prompt.h"
#include "cli/cli_common.h"
#include "cli/parallel.h"
#include "cli/commands.h"
#include "cli/grammar_options.h"
#include "engine/core/generate.h"
#include "engine/model/model.h"
#include "engine/text/tokenizer.h"

namespace minfer::cli {

namespace {

// "ID=BIAS", as in --logit-bias 13=-100
std::pair<int32_t, float> parse_logit_bias(const std::string& s) {
    static const std::regex form(R"(\s*(-?\d+)\s*=\s*([-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?)\s*)");
    std::smatch m;
    if (!std::regex_match(s, m, form)) throw UsageError("--logit-bias takes ID=BIAS, got '" + s + "'");
    return {std::stoi(m[1]), std::stof(m[2])};
}

}  // namespace

int cmd_run(int argc, char** argv) {
    cxxopts::Options opts = command_options("run", "Generate text from a prompt (one sequence).", "[MODEL] [options]");
    add_model_file_option(opts);
    // clang-format off
    opts.add_options()
        ("p,prompt", "prompt text (empty: start from BOS alone)", cxxopts::value<std::string>()->default_value(""))
        ("chat", "-p is a user message, rendered with the model's chat template; without -p, a conversation: one user turn per line of stdin")
        ("system", "system message (with --chat)", cxxopts::value<std::string>())
        ("chat-template", "FILE, or a built-in NAME (chatml, llama2, llama3, gemma): the template for --chat when the model has none, or instead of its own",
         cxxopts::value<std::string>()->default_value(""))
        ("n,n-predict", "new tokens to generate", cxxopts::value<int32_t>()->default_value("256"))
        ("temp", "temperature; 0 is greedy", cxxopts::value<float>()->default_value("0.8"))
        ("top-k", "keep the k most likely tokens (0 = off)", cxxopts::value<int32_t>()->default_value("40"))
        ("top-p", "nucleus sampling threshold (1 = off)", cxxopts::value<float>()->default_value("0.95"))
        ("min-p", "drop tokens below min-p x the top probability (0 = off)", cxxopts::value<float>()->default_value("0.05"))
        ("repeat-penalty", "repetition penalty over prompt and output (1 = off)", cxxopts::value<float>()->default_value("1.0"))
        ("presence-penalty", "presence penalty (0 = off)", cxxopts::value<float>()->default_value("0"))
        ("frequency-penalty", "frequency penalty (0 = off)", cxxopts::value<float>()->default_value("0"))
        ("logit-bias", "ID=BIAS added to a token's logit (repeatable)", cxxopts::value<std::vector<std::string>>())
        ("seed", "random seed (default: a random one)", cxxopts::value<uint64_t>())
        ("ignore-eos", "keep generating past end-of-generation tokens")
        ("json", "print one JSON object {prompt_ids, generated_ids, text} instead of streaming text")
        ("batch-tokens", "rows per prefill step (max_num_batched_tokens)", cxxopts::value<int32_t>()->default_value("512"))
        ("block-size", "tokens per KV block", cxxopts::value<int32_t>()->default_value("16"));
    // clang-format on
    add_constraint_options(opts, /*with_choice=*/false);
    add_device_options(opts, true);
    add_model_run_options(opts);
    add_parallel_options(opts);
    add_speculative_options(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"});

    GenerateOptions gen;
    gen.max_new_tokens = int_option(args, "n-predict", 0);
    SamplingParams& sp = gen.sampling;
    sp.temperature = args["temp"].as<float>();
    sp.top_k = args["top-k"].as<int32_t>();
    sp.top_p = args["top-p"].as<float>();
    sp.min_p = args["min-p"].as<float>();
    sp.repetition_penalty = args["repeat-penalty"].as<float>();
    sp.presence_penalty = args["presence-penalty"].as<float>();
    sp.frequency_penalty = args["frequency-penalty"].as<float>();
    if (args.count("logit-bias"))
        for (const auto& s : args["logit-bias"].as<std::vector<std::string>>()) sp.logit_bias.push_back(parse_logit_bias(s));
    sp.seed = args.count("seed") ? args["seed"].as<uint64_t>() : std::random_device{}();
    const int32_t batch_tokens = int_option(args, "batch-tokens", 1);
    const int32_t block_size = int_option(args, "block-size", 1, 1024);
    gen.speculative = speculative_config_from(args);

    const std::optional<KVDType> kv_choice = kv_cache_dtype_from(args);
    ModelLaunch launch = launch_model(args, nullptr);
    if (launch.worker_exit) return *launch.worker_exit;  // ranks > 0 of mpirun end here
    const auto& backend = launch.backend;
    const auto& model = launch.model;
    KVDType kv_dtype;
    try {
        kv_dtype = resolve_kv_dtype(*backend, kv_choice);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    auto tokenizer = Tokenizer::from_gguf(model->file());
    const ModelConfig& cfg = model->config();
    try {
        sp.validate(cfg.vocab_size);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }

    const std::string prompt = args["prompt"].as<std::string>();
    const bool chat = args.count("chat") > 0;
    if (!chat && (args.count("system") || !args["chat-template"].as<std::string>().empty()))
        throw UsageError("--system and --chat-template need --chat");
    if (!args.count("ignore-eos")) gen.stop_ids = default_stop_ids(*tokenizer);
    std::shared_ptr<const grammar::Grammar> grammar;
    try {
        grammar = constraint_from(args);
    } catch (const UnsupportedSchema& e) {
        throw UsageError(e.what());
    }
    const auto vocabulary = grammar ? token_vocabulary(*tokenizer) : nullptr;

    const int32_t blocks = (cfg.context_len + block_size - 1) / block_size;
    BlockManager block_manager(blocks, block_size, /*enable_prefix_caching=*/false);
    // A row of logits, and one per draft a step verifies.
    const int32_t logits_rows = 1 + (gen.speculative.enabled() ? gen.speculative.num_speculative_tokens : 0);
    const RunnerLimits limits{std::max(batch_tokens, logits_rows), 1, blocks, block_size, logits_rows, false, kv_dtype};
    ModelRunner runner(*model, limits);
    const auto draft_model = load_draft_model(gen.speculative, *backend, *tokenizer);
    std::optional<DraftProposer> drafter;
    if (draft_model) gen.drafter = &drafter.emplace(*draft_model, RunnerLimits{limits.max_num_batched_tokens, 1, blocks,
                                                                              block_size, 1, false, kv_dtype});
    const bool json = args.count("json") > 0;

    // Generates from prompt_ids, streaming the text (or printing one JSON line); returns the new text.
    auto respond = [&](const std::vector<int32_t>& prompt_ids, bool echo_prompt) {
        if (prompt_ids.empty()) throw UsageError("the prompt encodes to no tokens and the model adds no BOS");
        if (prompt_ids.size() > size_t(cfg.context_len))
            throw UsageError(fmt::format("the prompt is {} tokens, longer than the model's context of {} tokens",
                                         prompt_ids.size(), cfg.context_len));
        IncrementalDetokenizer detok(*tokenizer, prompt_ids);
        if (!json && echo_prompt) {
            std::fputs(tokenizer->decode(prompt_ids).c_str(), stdout);
            std::fflush(stdout);
        }
        std::string reply;
        std::optional<grammar::Constraint> constraint;  // each reply starts the grammar afresh
        if (grammar) gen.constraint = &constraint.emplace(grammar, vocabulary);
        const GenerateResult r = generate(runner, block_manager, cfg.context_len, prompt_ids, gen, [&](int32_t id) {
            const bool stop = std::find(gen.stop_ids.begin(), gen.stop_ids.end(), id) != gen.stop_ids.end();
            if (stop) return;  // an end-of-turn token is not part of the reply
            const std::string piece = detok.push(id);
            reply += piece;
            if (json) return;
            std::fputs(piece.c_str(), stdout);
            std::fflush(stdout);
        });
        const std::string tail = detok.flush();
        reply += tail;
        if (json) {
            boost::json::object o;
            o["prompt_ids"] = boost::json::value_from(prompt_ids);
            o["generated_ids"] = boost::json::value_from(r.generated_ids);
            if (echo_prompt) {
                std::vector<int32_t> all = prompt_ids;
                all.insert(all.end(), r.generated_ids.begin(), r.generated_ids.end());
                o["text"] = tokenizer->decode(all);
            } else {
                o["text"] = reply;
            }
            o["finish_reason"] = r.finish_reason;
            std::printf("%s\n", boost::json::serialize(o).c_str());
        } else {
            std::printf("%s\n", tail.c_str());
        }
        std::fflush(stdout);
        const size_t n_gen = r.generated_ids.size();
        // The prefill ends with the first token's sample: its time is the time to first token.
        std::fprintf(stderr,
                     "%s | prompt: %zu tokens, %.1f tok/s | time to first token: %.1f ms | generation: %zu tokens, "
                     "%.1f tok/s | finish: %s\n",
                     backend->name().c_str(), prompt_ids.size(),
                     r.prefill_seconds > 0 ? prompt_ids.size() / r.prefill_seconds : 0.0, r.prefill_seconds * 1e3, n_gen,
                     r.decode_seconds > 0 && n_gen > 1 ? (n_gen - 1) / r.decode_seconds : 0.0, r.finish_reason.c_str());
        if (gen.speculative.enabled()) print_spec_summary(r.spec, gen.speculative);
        return reply;
    };

    if (!chat) {
        respond(tokenizer->encode(prompt, /*add_special=*/true), /*echo_prompt=*/true);
        return 0;
    }

    const ChatTemplate tmpl = chat_template_of(*model, *tokenizer, args["chat-template"].as<std::string>());
    boost::json::array messages;
    if (args.count("system")) messages.push_back({{"role", "system"}, {"content", args["system"].as<std::string>()}});
    auto turn = [&](const std::string& user) {
        messages.push_back({{"role", "user"}, {"content", user}});
        const ChatPrompt p = encode_chat(tmpl, *tokenizer, messages);
        const std::string reply = respond(p.ids, /*echo_prompt=*/false);
        messages.push_back({{"role", "assistant"}, {"content", reply}});
    };
    if (!prompt.empty()) {
        turn(prompt);
        return 0;
    }
    // A conversation: each line of stdin is a user turn, the whole history re-rendered each time.
    std::string line;
    while (true) {
        if (isatty(0)) std::fputs("> ", stderr);
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        turn(line);
    }
    return 0;
}

}  // namespace minfer::cli
