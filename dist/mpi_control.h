// The control channel over MPI, on the host, on a communicator of its own.
#pragma once

#include <memory>

#include "kernels/parallel.h"

namespace minfer {

// Needs an MpiSession (mpi_session.h) for its life. receive polls the
// broadcast (MPI_Ibcast + MPI_Test), napping up to a millisecond.
std::unique_ptr<Control> make_mpi_control(const World& world);

}  // namespace minfer
