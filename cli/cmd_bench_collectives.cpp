// minfer bench collectives: the Communicator's all-reduce, all-gather and
// all-to-all timed over the ranks of mpirun, at the sizes a step moves and
// beyond, with nccl-tests' definitions of bandwidth:
//
//   algbw = bytes / time;  busbw = algbw x 2(n-1)/n (all-reduce), x (n-1)/n (all-gather, all-to-all)
//
// busbw is what each link carried, comparable with the link's own speed
// whatever the number of ranks. On --device cuda the collectives are NCCL's,
// on the CPU MPI's.
#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "dist/communicator.h"
#include "dist/mpi_control.h"
#include "dist/mpi_session.h"

namespace minfer::cli {

namespace {

// Runs `op` iters times a repetition, every rank starting together: the
// seconds a call takes, the median of the repetitions, the slowest rank's.
template <class Op>
double time_op(Control& control, Backend& backend, int32_t repetitions, int32_t iters, Op&& op) {
    for (int i = 0; i < 3; ++i) op();  // warm-up: NCCL's first calls set up their channels
    backend.synchronize();
    std::vector<double> runs;
    for (int32_t r = 0; r < repetitions; ++r) {
        control.min(0);  // a barrier
        const auto t0 = std::chrono::steady_clock::now();
        for (int32_t i = 0; i < iters; ++i) op();
        backend.synchronize();
        runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
    std::sort(runs.begin(), runs.end());
    const int64_t ns = int64_t(runs[runs.size() / 2] * 1e9);
    return double(-control.min(-ns)) * 1e-9;  // the slowest rank's
}

}  // namespace

int bench_collectives_cmd(int argc, char** argv) {
    cxxopts::Options opts("bench collectives",
                          "All-reduce, all-gather and all-to-all over the ranks of mpirun (NCCL on --device cuda, "
                          "MPI on the CPU): time a call and nccl-tests' algbw and busbw. Launch: mpirun -np N "
                          "minfer bench collectives");
    // clang-format off
    opts.add_options()
        ("min-bytes", "smallest buffer a rank holds", cxxopts::value<int32_t>()->default_value("4096"))
        ("max-bytes", "largest buffer a rank holds (each size 4x the last)",
         cxxopts::value<int32_t>()->default_value("67108864"))
        ("repetitions", "measured runs a size (median)", cxxopts::value<int32_t>()->default_value("5"))
        ("json", "one JSON object a line");
    // clang-format on
    add_device_options(opts, true);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv);
    const int32_t min_bytes = int_option(args, "min-bytes", 4), max_bytes = int_option(args, "max-bytes", min_bytes);
    const int32_t repetitions = int_option(args, "repetitions", 1);
    if (!launched_by_mpi()) throw UsageError("bench collectives runs over ranks: launch it as mpirun -np N minfer ...");
    MpiSession mpi;
    const World& world = mpi.world();
    if (world.size < 2) throw UsageError("bench collectives needs at least 2 ranks (mpirun -np N, N >= 2)");
    const auto control = make_mpi_control(world);
    const auto backend = backend_from(args, world);
    const auto comm = make_communicator(*backend, *control);
    const int32_t n = world.size;
    const bool json = args.count("json") > 0;
    if (world.rank == 0 && !json)
        std::printf("%s over %d ranks (%s), medians of %d runs, the slowest rank's\n%-11s %12s %10s %12s %12s\n",
                    comm->name().c_str(), n, backend->name().c_str(), repetitions, "op", "bytes a rank", "time",
                    "algbw", "busbw");

    // Buffers for the largest size: the all-gather's and all-to-all's outputs hold n pieces.
    const size_t max_floats = size_t(max_bytes) / sizeof(float);
    auto* x = static_cast<float*>(backend->alloc(max_floats * sizeof(float)));
    auto* out = static_cast<float*>(backend->alloc(max_floats * n * sizeof(float)));
    const std::vector<float> zeros(max_floats, 0.0f);  // all-reduced in place again and again: zeros stay finite
    backend->upload(x, zeros.data(), zeros.size() * sizeof(float));

    for (size_t bytes = size_t(min_bytes); bytes <= size_t(max_bytes); bytes *= 4) {
        const size_t floats = bytes / sizeof(float), piece = floats / size_t(n);
        const int32_t iters = bytes <= (size_t(1) << 20) ? 50 : bytes <= (size_t(16) << 20) ? 10 : 3;
        const std::vector<size_t> counts(size_t(n), piece);
        struct Row {
            const char* op;
            double seconds;
            double bus;  // busbw / algbw
        };
        const Row rows[] = {
            {"all-reduce", time_op(*control, *backend, repetitions, iters, [&] { comm->all_reduce_sum(x, floats); }),
             2.0 * (n - 1) / n},
            // nccl-tests sizes an all-gather by its output: n pieces of `piece`.
            {"all-gather", time_op(*control, *backend, repetitions, iters, [&] { comm->all_gather(x, piece, out); }),
             double(n - 1) / n},
            {"all-to-all", time_op(*control, *backend, repetitions, iters,
                                   [&] { comm->all_to_all_v(x, counts, out, counts); }),
             double(n - 1) / n},
        };
        if (world.rank != 0) continue;
        for (const Row& r : rows) {
            const double moved = double(piece * n * sizeof(float)), algbw = moved / r.seconds / 1e9;
            if (json) {
                boost::json::object j{{"op", r.op},         {"ranks", n},
                                      {"bytes", moved},     {"seconds", r.seconds},
                                      {"algbw_gb_s", algbw}, {"busbw_gb_s", algbw * r.bus},
                                      {"transport", comm->name()}};
                std::printf("%s\n", boost::json::serialize(j).c_str());
            } else {
                std::printf("%-11s %12.0f %8.1f us %7.2f GB/s %7.2f GB/s\n", r.op, moved, r.seconds * 1e6, algbw,
                            algbw * r.bus);
            }
        }
    }
    backend->free(x);
    backend->free(out);
    return 0;
}

}  // namespace minfer::cli
