// minfer perplexity: the standing quality check of a model file (llama-perplexity's method).
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/model/model.h"
#include "engine/core/perplexity.h"
#include "engine/text/tokenizer.h"

namespace minfer::cli {

int cmd_perplexity(int argc, char** argv) {
    cxxopts::Options opts = command_options("perplexity",
                                            "Perplexity of a model over a text file: chunks of --ctx tokens, the "
                                            "second half of each scored (as llama-perplexity does).",
                                            "[MODEL] --file TEXT [options]");
    add_model_file_option(opts);
    // clang-format off
    opts.add_options()
        ("f,file", "the text to score (UTF-8)", cxxopts::value<std::string>())
        ("c,ctx", "tokens per chunk", cxxopts::value<int32_t>()->default_value("512"))
        ("chunks", "score at most this many chunks (0 = all)", cxxopts::value<int32_t>()->default_value("0"))
        ("batch-tokens", "rows per step", cxxopts::value<int32_t>()->default_value("512"))
        ("json", "print one JSON object: tokens, chunk NLLs, ppl, and the token ids of the text");
    // clang-format on
    add_device_options(opts, false);
    add_synthetic_option(opts);
    add_quantization_option(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"});
    if (!args.count("file")) throw UsageError("--file TEXT is required");
    PerplexityOptions po;
    po.n_ctx = int_option(args, "ctx", 4);
    po.max_chunks = int_option(args, "chunks", 0);
    const int32_t batch_tokens = int_option(args, "batch-tokens", 1);

    const std::string path = args["file"].as<std::string>();
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError("cannot read --file " + path);
    std::stringstream text;
    text << in.rdbuf();

    auto backend = backend_from(args);
    auto model = Model::load(open_model_arg(args, "model"), *backend);
    auto tokenizer = Tokenizer::from_gguf(model->file());
    const ModelConfig& cfg = model->config();
    if (po.n_ctx > cfg.context_len)
        throw UsageError(fmt::format("--ctx {} is longer than the model's context of {} tokens", po.n_ctx,
                                     cfg.context_len));
    const std::vector<int32_t> tokens = tokenizer->encode(text.str(), /*add_special=*/false);
    // Like llama.cpp: a model that adds BOS sees it at the start of every chunk.
    po.bos_id = tokenizer->encode("", /*add_special=*/true).empty() ? -1 : tokenizer->bos_id();
    const int32_t chunks = perplexity_chunks(tokens.size(), po);
    if (chunks == 0)
        throw UsageError(fmt::format("{} has {} tokens, fewer than one chunk of --ctx {}", path, tokens.size(),
                                     po.n_ctx));

    const int32_t block_size = 16;
    const int32_t blocks = (po.n_ctx + block_size - 1) / block_size;
    const int32_t rows = std::min(batch_tokens, po.n_ctx);
    ModelRunner runner(*model, {rows, 1, blocks, block_size, std::min(rows, 128)});
    const bool json = args.count("json") > 0;
    if (!json)
        std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d, scoring %d tokens per chunk\n", tokens.size(),
                     chunks, po.n_ctx, po.n_ctx - 1 - po.n_ctx / 2);
    const PerplexityResult r = perplexity(runner, tokens, po, [&](int32_t c, const PerplexityResult& so_far) {
        if (!json) std::fprintf(stderr, "[%d] %.4f\n", c + 1, so_far.ppl());
    });
    if (json) {
        boost::json::object o;
        o["n_ctx"] = po.n_ctx;
        o["bos_id"] = po.bos_id;
        o["chunks"] = chunks;
        o["scored_tokens"] = r.scored_tokens;
        o["chunk_nll"] = boost::json::value_from(r.chunk_nll);
        o["ppl"] = r.ppl();
        o["ppl_stderr"] = r.ppl_stderr();
        o["tokens"] = boost::json::value_from(std::vector<int32_t>(tokens.begin(), tokens.begin() + int64_t(chunks) * po.n_ctx));
        std::printf("%s\n", boost::json::serialize(o).c_str());
    } else {
        std::printf("PPL = %.4f +/- %.4f over %lld tokens (%s)\n", r.ppl(), r.ppl_stderr(),
                    static_cast<long long>(r.scored_tokens), backend->name().c_str());
    }
    return 0;
}

}  // namespace minfer::cli
