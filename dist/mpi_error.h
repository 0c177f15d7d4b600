// MPI's error codes as exceptions (dist/ sets MPI_ERRORS_RETURN on its communicators).
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace minfer {

inline void check_mpi(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error(std::string(what) + ": " + std::string(text, size_t(len)));
}

// A communicator of the whole world for one use (commands, tensors), its
// errors returned as codes for check_mpi. MPI_Comm_free it.
inline MPI_Comm duplicate_world() {
    MPI_Comm comm;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return comm;
}

}  // namespace minfer
