// The MPI side of a parallel launch: whether mpirun started this process, the
// session (MPI_Init .. MPI_Finalize) and the process's World in it.
#pragma once

#include <stdexcept>

#include "kernels/world.h"

namespace minfer {

// A launch that cannot work (-tp without mpirun, mismatched ranks): the
// command prints it as a usage error on rank 0 and every rank exits non-zero.
struct LaunchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// True when an MPI launcher (mpirun/mpiexec of Open MPI or MPICH, or srun
// with PMI) started this process: its environment names a world size.
bool launched_by_mpi();
// This process's rank as the launcher's environment gives it, before MPI
// starts (0 when no launcher started it): a bad flag, which every rank meets
// alike, is printed by rank 0 alone.
int launcher_rank();

// MPI for the life of the object: initialised with MPI_THREAD_SERIALIZED (the
// engine thread and the main thread take turns), finalised at the end.
class MpiSession {
public:
    MpiSession();
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    // Rank and size in MPI_COMM_WORLD; local rank and size among the ranks
    // of this node (MPI_Comm_split_type SHARED): the GPU, and the CPU cores.
    const World& world() const { return world_; }

private:
    World world_;
};

}  // namespace minfer
