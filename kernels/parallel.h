// The ranks of a tensor-parallel run as the layers below dist/ see them: a
// control channel (rank 0 tells the other ranks what to run; all ranks agree
// on errors and sizes) and collectives over tensors in a backend's memory.
// dist/ implements both over MPI and NCCL and the CLI hands the model a
// Group; a model loaded without one is a world of one.
//
// Every call is collective: each rank makes the same calls in the same
// order, or the job waits forever (ModelRunner keeps that order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
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
    virtual ~Control() = default;
    Control(const Control&) = delete;
    Control& operator=(const Control&) = delete;

    const World& world() const { return world_; }
    bool is_root() const { return world_.rank == 0; }

    // A command and its payload from rank 0 to every other rank: rank 0
    // calls send, the others receive (which waits without spinning a core:
    // an idle server's workers may wait for hours).
    virtual void send(int32_t command, const std::vector<int32_t>& payload) = 0;
    virtual int32_t receive(std::vector<int32_t>& payload) = 0;
    // Bytes from rank 0 to all (rank 0's buffer is read, the others' written).
    virtual void broadcast(void* data, size_t bytes) = 0;
    // The minimum of every rank's value.
    virtual int64_t min(int64_t value) = 0;
    // Ends every rank of the job at once (a rank that cannot go on).
    [[noreturn]] virtual void abort(int code) = 0;

    // Every rank says whether its part went well (error null): nothing happens
    // when all did; else the lowest failing rank rethrows its error and the
    // others throw OtherRankFailed, so that one rank reports and all exit.
    void agree(const std::exception_ptr& error) {
        const int64_t failed = min(error ? world_.rank : world_.size);
        if (failed == world_.size) return;
        if (failed == world_.rank) std::rethrow_exception(error);
        throw OtherRankFailed();
    }

protected:
    explicit Control(const World& world) : world_(world) {}
    World world_;
};

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual std::string name() const = 0;  // "mpi" or "nccl"
    int32_t rank() const { return world_.rank; }
    int32_t size() const { return world_.size; }

    // data[count] = the sum over ranks of each rank's data[count], the same on every rank.
    virtual void all_reduce_sum(float* data, size_t count) = 0;
    // recv[size() * count]: rank r's send[count] at recv + r * count.
    virtual void all_gather(const float* send, size_t count, float* recv) = 0;
    // Each rank sends send_counts[r] floats to rank r, one run after another
    // from `send`, and receives recv_counts[r] from rank r into `recv`, in rank
    // order (a rank's recv_counts[r] is rank r's send_counts[this rank]).
    virtual void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                              std::span<const size_t> recv_counts) = 0;
    // bytes from rank `root`'s data into every other rank's.
    virtual void broadcast(void* data, size_t bytes, int32_t root) = 0;
    // Point to point: bytes to rank `peer`, which receives them with recv
    // (blocks until matched; the two ranks call in the same order).
    virtual void send(const void* data, size_t bytes, int32_t peer) = 0;
    virtual void recv(void* data, size_t bytes, int32_t peer) = 0;

    // Floats this rank has all-reduced so far (tests/dist prints the volume a step).
    size_t floats_reduced() const { return floats_reduced_; }

protected:
    explicit Communicator(const World& world) : world_(world) {}
    World world_;
    size_t floats_reduced_ = 0;
};

// What a model loaded for tensor parallelism holds (Model::load's group).
struct Group {
    Control& control;
    Communicator& comm;
    // A mixture-of-experts model's experts: whole experts split by id among
    // the ranks (vLLM's --enable-expert-parallel), not each expert's matrices.
    bool expert_parallel = false;
    int32_t rank() const { return control.world().rank; }
    int32_t size() const { return control.world().size; }
    bool is_root() const { return rank() == 0; }
};

}  // namespace minfer
