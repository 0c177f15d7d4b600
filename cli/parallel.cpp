#include "cli/parallel.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>

#include "cli/cli_common.h"
#include "dist/communicator.h"
#include "dist/mpi_control.h"
#include "engine/model/model_runner.h"

namespace minfer::cli {

void add_parallel_options(cxxopts::Options& opts) {
    opts.add_options("parallelism")(
        "tensor-parallel-size",
        "ranks the model is split over (-tp N); launch with mpirun -np N",
        cxxopts::value<int32_t>()->default_value("1"))(
        "enable-expert-parallel",
        "a mixture-of-experts model's experts are split whole among the ranks (each holds n_experts / N)");
}

void print_parallel_summary(const ParallelStats& s) {
    const double per_step = s.steps ? double(s.floats_all_reduced) / double(s.steps) : 0.0;
    std::fprintf(stderr, "tensor parallel over %d ranks: %.0f floats (%.1f KiB) all-reduced a step by each rank, %lld steps\n",
                 s.ranks, per_step, per_step * 4 / 1024, (long long)s.steps);
    if (s.expert_pairs.empty()) return;
    int64_t total = 0;
    for (const int64_t p : s.expert_pairs) total += p;
    std::string shares;
    for (const int64_t p : s.expert_pairs)
        shares += fmt::format("{}{:.1f}%", shares.empty() ? "" : " / ", total ? 100.0 * double(p) / double(total) : 0.0);
    std::fprintf(stderr,
                 "expert parallel: (row, expert) pairs by rank %s of %lld; busiest rank over the mean a step: "
                 "mean %.3f, worst %.3f (%lld steps counted)\n",
                 shares.c_str(), (long long)total, s.imbalance_mean(),
                 s.imbalance_max, (long long)s.balance_steps);
}

std::unique_ptr<ParallelRun> ParallelRun::start(const cxxopts::ParseResult& args) {
    const int32_t tp = args["tensor-parallel-size"].as<int32_t>();
    if (tp < 1) throw UsageError(fmt::format("--tensor-parallel-size must be at least 1, got {}", tp));
    if (!launched_by_mpi()) {
        if (tp == 1) return nullptr;
        throw UsageError(fmt::format("-tp {} runs one process per rank: launch it as mpirun -np {} minfer ... -tp {}",
                                     tp, tp, tp));
    }
    std::unique_ptr<ParallelRun> run(new ParallelRun);
    try {
        run->mpi_ = std::make_unique<MpiSession>();
    } catch (const LaunchError& e) {
        throw UsageError(e.what());
    }
    const World& w = run->world();
    if (w.size != tp) {
        if (w.rank != 0) throw OtherRankFailed();
        throw UsageError(fmt::format("mpirun started {} rank(s) but -tp is {}: they must be equal", w.size, tp));
    }
    if (tp == 1) return nullptr;  // mpirun -np 1: a world of one (MPI ends with `run`)
    run->control_ = make_mpi_control(w);
    run->expert_parallel_ = args["enable-expert-parallel"].as<bool>();
    return run;
}

ParallelRun::~ParallelRun() {
    if (workers_serving_ && is_root()) {
        try {
            ModelRunner::release_workers(*group_);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "minfer: rank 0 could not release the other ranks: %s\n", e.what());
        }
    }
}

std::unique_ptr<Model> ParallelRun::load(Backend& backend, const std::function<GGUFFile()>& open) {
    std::unique_ptr<Model> model;
    std::exception_ptr error;
    try {
        comm_ = make_communicator(backend, *control_);
        group_ = std::make_unique<Group>(Group{*control_, *comm_, expert_parallel_});
        model = Model::load(open(), backend, group_.get());
    } catch (...) {
        error = std::current_exception();
    }
    control_->agree(error);
    return model;
}

std::optional<int> ParallelRun::split_roles(const Model& model, EngineConfig* config) {
    if (config) {
        try {
            config->num_kv_blocks = agree_kv_blocks(model, *config);
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    workers_serving_ = true;
    if (is_root()) return std::nullopt;
    // mpirun hands SIGINT and SIGTERM to every rank: rank 0 drains its
    // requests and then releases the others, which must live until then.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);
    try {
        ModelRunner::serve_workers(model);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "minfer: rank %d: error: %s (ending every rank)\n", world().rank, e.what());
        control_->abort(1);
    }
    workers_serving_ = false;
    return 0;
}

ModelLaunch launch_model(const cxxopts::ParseResult& args, EngineConfig* config, bool instances_under_mpi) {
    ModelLaunch l;
    if (instances_under_mpi) {
        if (args["tensor-parallel-size"].as<int32_t>() != 1)
            throw UsageError("--kv-role runs each instance whole: -tp must be 1 (a split instance's KV lives on every rank)");
        if (launched_by_mpi()) {
            try {
                l.instances = std::make_unique<MpiSession>();
            } catch (const LaunchError& e) {
                throw UsageError(e.what());
            }
        }
        l.backend = backend_from(args, l.instances ? l.instances->world() : World{});
        l.model = Model::load(open_model_arg(args, "model"), *l.backend);
        return l;
    }
    l.parallel = ParallelRun::start(args);
    l.backend = backend_from(args, l.parallel ? l.parallel->world() : World{});
    const auto open = [&] { return open_model_arg(args, "model"); };
    if (!l.parallel) {
        l.model = Model::load(open(), *l.backend);
        return l;
    }
    l.model = l.parallel->load(*l.backend, open);
    l.worker_exit = l.parallel->split_roles(*l.model, config);
    return l;
}

}  // namespace minfer::cli
