// minfer: one binary, many subcommands.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/build_info.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "dist/mpi_session.h"
#include "kernels/parallel.h"

namespace {

struct Subcommand {
    const char* name;
    int (*fn)(int, char**);
    const char* summary;
};

const Subcommand kSubcommands[] = {
    {"serve", minfer::cli::cmd_serve, "the OpenAI-compatible HTTP server"},
    {"router", minfer::cli::cmd_router, "OpenAI-compatible proxy for prefill/decode disaggregation"},
    {"run", minfer::cli::cmd_run, "generate text from a prompt"},
    {"generate", minfer::cli::cmd_generate, "offline batch inference over a JSONL file of requests"},
    {"perplexity", minfer::cli::cmd_perplexity, "score a model on a text file (llama-perplexity's method)"},
    {"inspect", minfer::cli::cmd_inspect, "print a GGUF file's metadata and tensors"},
    {"tokenize", minfer::cli::cmd_tokenize, "turn text into token ids"},
    {"synth", minfer::cli::cmd_synth, "write a random-weight GGUF in the shape of a real model"},
    {"bench", minfer::cli::cmd_bench, "benchmarks: latency (prefill and decode speed), serve (load generator)"},
    {"book", minfer::cli::cmd_book, "the Learn Kernels book: serve it, or build it as a static site"},
    {"grammar", minfer::cli::cmd_grammar, "check texts against a grammar or JSON Schema through its token masks"},
    {"chat-template", minfer::cli::cmd_chat_template, "render a chat template (a model's or a file's) for a list of messages"},
};

void print_usage(FILE* out) {
    std::fprintf(out, "usage: minfer <command> [options]    (minfer <command> --help for its options)\n\ncommands:\n");
    for (const auto& s : kSubcommands) std::fprintf(out, "  %-14s %s\n", s.name, s.summary);
    std::fprintf(out, "\n  --version  print the version and the backends compiled in\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const std::string cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
        print_usage(stdout);
        return 0;
    }
    if (cmd == "--version" || cmd == "version") {
        std::printf("%s", minfer::build_info().c_str());
        return 0;
    }
    // vLLM's two-letter flag, which cxxopts would read as -t -p.
    for (int i = 2; i < argc; ++i)
        if (std::strcmp(argv[i], "-tp") == 0) argv[i] = const_cast<char*>("--tensor-parallel-size");
    for (const auto& s : kSubcommands) {
        if (cmd == s.name) {
            try {
                return s.fn(argc - 1, argv + 1);
            } catch (const minfer::cli::HelpPrinted&) {
                return 0;
            } catch (const minfer::OtherRankFailed&) {
                return 1;  // the rank that failed printed why
            } catch (const minfer::cli::UsageError& e) {
                // Under mpirun every rank parsed the same flags: one says what is wrong.
                if (minfer::launcher_rank() == 0) std::fprintf(stderr, "minfer %s: %s\n", s.name, e.what());
                return 2;
            } catch (const std::exception& e) {
                std::fprintf(stderr, "minfer %s: error: %s\n", s.name, e.what());
                return 1;
            }
        }
    }
    std::fprintf(stderr, "minfer: unknown command '%s' (try minfer --help)\n", cmd.c_str());
    return 2;
}
