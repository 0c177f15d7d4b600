// A command run over the ranks of mpirun (tensor parallelism): every rank
// parses the same flags, makes its backend and loads its shard of the model;
// then rank 0 goes on with the command while the others serve its runner's
// steps until it lets them go. A command that runs a model starts with
//
//   ModelLaunch launch = launch_model(args, &config);  // config: the engine's, or null (`run`)
//   if (launch.worker_exit) return *launch.worker_exit;  // ranks > 0 end here
#pragma once

#include <cxxopts.hpp>
#include <functional>
#include <memory>
#include <optional>

#include "dist/mpi_session.h"
#include "kernels/parallel.h"
#include "engine/gguf/gguf.h"
#include "engine/core/llm_engine.h"
#include "engine/model/model.h"

namespace minfer::cli {

// -tp/--tensor-parallel-size N (the ranks mpirun starts), --enable-expert-parallel.
void add_parallel_options(cxxopts::Options& opts);
// generate's line on what a split model's steps moved (ModelRunner::parallel_stats).
void print_parallel_summary(const ParallelStats& stats);

class ParallelRun {
public:
    // Null for a world of one (-tp 1 and no mpirun). A launch that cannot work
    // (-tp N without mpirun, -np and -tp differing) is a UsageError on rank 0;
    // the other ranks exit with 1 quietly (OtherRankFailed).
    static std::unique_ptr<ParallelRun> start(const cxxopts::ParseResult& args);
    // Rank 0 lets the other ranks go, if they serve, before MPI ends.
    ~ParallelRun();

    const World& world() const { return mpi_->world(); }
    bool is_root() const { return world().rank == 0; }
    // Loads this rank's shard on `backend`. If any rank fails, the lowest such
    // rank throws its error and the others OtherRankFailed, so the job prints one.
    std::unique_ptr<Model> load(Backend& backend, const std::function<GGUFFile()>& open);
    // After load. With an engine's config, all ranks first agree on the KV
    // pool (the smallest any rank has room for), which rank 0's config then
    // holds (num_kv_blocks). Then ranks other than 0 serve the steps of rank
    // 0's runners until it is done and return the exit code; rank 0 returns
    // nullopt and goes on with the command. A rank that fails while serving
    // ends the whole job (no rank waits).
    std::optional<int> split_roles(const Model& model, EngineConfig* config = nullptr);

private:
    ParallelRun() = default;
    std::unique_ptr<MpiSession> mpi_;
    std::unique_ptr<Control> control_;
    std::unique_ptr<Communicator> comm_;
    std::unique_ptr<Group> group_;
    bool expert_parallel_ = false;
    bool workers_serving_ = false;
};

// What a command that runs a model starts from: the parallel run (null for a
// world of one), the backend for this rank, and the model (this rank's shard).
// On ranks other than 0, worker_exit is set once they have served rank 0's
// steps: the command returns it. (Members end in reverse: rank 0 lets the
// other ranks go last, after the command's engine and runners.)
struct ModelLaunch {
    // Disaggregation under mpirun: each rank is an instance of its own (the
    // model whole on every rank), and MPI only carries KV transfers.
    std::unique_ptr<MpiSession> instances;
    std::unique_ptr<ParallelRun> parallel;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Model> model;
    std::optional<int> worker_exit;
};
// --device/--threads/--quantization, --synthetic or MODEL, -tp. With an
// engine config, the ranks agree on its KV pool (ParallelRun::split_roles).
// With instances_under_mpi (serve --kv-role), a launch by mpirun starts one
// instance per rank instead of one model split over the ranks.
ModelLaunch launch_model(const cxxopts::ParseResult& args, EngineConfig* config, bool instances_under_mpi = false);

}  // namespace minfer::cli
