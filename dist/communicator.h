// The collectives over tensors for a backend (kernels/parallel.h's
// Communicator): NCCL between GPUs (its calls queued on the backend's stream,
// so that CUDA graphs record them), MPI between CPU processes.
#pragma once

#include <memory>

#include "kernels/backend.h"
#include "kernels/parallel.h"

namespace minfer {

// NCCL for CUDA (its unique id sent over `control`), MPI for the CPU.
// Collective: every rank calls it.
std::unique_ptr<Communicator> make_communicator(Backend& backend, Control& control);

}  // namespace minfer
