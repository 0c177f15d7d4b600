// Control messages between ranks over MPI, on the host: rank 0 tells the other
// ranks what to run (step_channel.h), and all ranks agree on a few numbers.
// Every call here is collective: each rank makes the same calls in the same
// order, or the job waits forever; the step channel keeps that order.
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/world.h"

namespace minfer {

// This rank stops because another one failed, which reports why: the job
// prints one error, not one per rank.
struct OtherRankFailed : std::runtime_error {
    OtherRankFailed() : std::runtime_error("another rank failed") {}
};

class Control {
public:
    explicit Control(const World& world);
    ~Control();
    Control(const Control&) = delete;
    Control& operator=(const Control&) = delete;

    const World& world() const { return world_; }
    bool is_root() const { return world_.rank == 0; }

    // A command and its payload from rank 0 to every other rank. Rank 0 calls
    // send, the others receive, which waits without spinning a core (it polls,
    // sleeping up to a millisecond, since an idle server's workers may wait for hours).
    void send(int32_t command, const std::vector<int32_t>& payload);
    int32_t receive(std::vector<int32_t>& payload);

    // Bytes from rank 0 to all (rank 0's buffer is read, the others' written).
    void broadcast(void* data, size_t bytes);
    // The minimum of every rank's value.
    int64_t min(int64_t value);
    // Every rank says whether its part went well (error null): nothing happens
    // when all did; else the lowest failing rank rethrows its error and the
    // others throw OtherRankFailed, so that one rank reports and all exit.
    void agree(const std::exception_ptr& error);
    // Ends every rank of the job at once (a rank that cannot go on).
    [[noreturn]] void abort(int code);

private:
    World world_;
    void* comm_ = nullptr;  // an MPI_Comm of its own (MPI_Comm_dup): control never mixes with tensors
};

}  // namespace minfer
