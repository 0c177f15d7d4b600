// Built against minfer_model alone: the model sees the parallel run through
// kernels/parallel.h, never dist/'s MPI and NCCL (the test expects this build
// to fail with "file not found").
#include "dist/mpi_session.h"

int layering_probe_climb() { return sizeof(minfer::MpiSession) > 0; }
