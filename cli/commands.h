// The `minfer` subcommands. Each parses its own flags (cxxopts), prints its
// own --help, and returns the process exit code; errors are one line on stderr.
#pragma once

namespace minfer::cli {

int cmd_run(int argc, char** argv);
int cmd_grammar(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_bench_serve(int argc, char** argv);  // minfer bench serve (cmd_bench_serve.cpp)
int bench_collectives_cmd(int argc, char** argv);  // minfer bench collectives (cmd_bench_collectives.cpp)
int cmd_generate(int argc, char** argv);
int cmd_chat_template(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_router(int argc, char** argv);  // minfer router: prefill/decode disaggregation proxy (cmd_router.cpp)
int cmd_book(int argc, char** argv);  // minfer book serve|build (cmd_book.cpp)

// Path of the bundled model, the default of every command that takes one.
const char* default_model_path();

}  // namespace minfer::cli
