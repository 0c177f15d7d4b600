// Collectives over tensors in a backend's memory, between the ranks of a
// tensor-parallel group: MPI between CPU processes, NCCL between GPUs (its
// calls queued on the backend's stream, so that CUDA graphs record them).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "dist/control.h"

namespace minfer {

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

    // Floats this rank has all-reduced so far (tests/dist prints the volume a step).
    size_t floats_reduced() const { return floats_reduced_; }

protected:
    explicit Communicator(const World& world) : world_(world) {}
    World world_;
    size_t floats_reduced_ = 0;
};

// The communicator for `backend`'s memory: NCCL for CUDA (its unique id sent
// over `control`), MPI for the CPU. Collective: every rank calls it.
std::unique_ptr<Communicator> make_communicator(Backend& backend, Control& control);

}  // namespace minfer
