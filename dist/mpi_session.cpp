#include "dist/mpi_session.h"

#include <mpi.h>

#include <cstdlib>

namespace minfer {

bool launched_by_mpi() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
        if (std::getenv(name)) return true;
    return false;
}

int launcher_rank() {
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
        if (const char* v = std::getenv(name)) return std::atoi(v);
    return 0;
}

MpiSession::MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) throw LaunchError("MPI is already initialised in this process");
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw LaunchError("MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        throw LaunchError("this MPI library does not allow calls from more than one thread (MPI_THREAD_SERIALIZED)");
    }
    // Errors come back as codes (dist/ turns them into exceptions) instead of aborting the job at once.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_.size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &world_.local_rank);
    MPI_Comm_size(node, &world_.local_size);
    MPI_Comm_free(&node);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

}  // namespace minfer
