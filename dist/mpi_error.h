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

}  // namespace minfer
