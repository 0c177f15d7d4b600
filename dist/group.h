// A tensor-parallel group as the model sees it: the control channel (rank 0
// tells the others what to run) and the collectives over tensors. The CLI
// makes one per launch under mpirun (cli/parallel.h); a model loaded without
// one is a world of one.
#pragma once

#include "dist/communicator.h"
#include "dist/control.h"

namespace minfer {

struct Group {
    Control& control;
    Communicator& comm;
    int32_t rank() const { return control.world().rank; }
    int32_t size() const { return control.world().size; }
    bool is_root() const { return rank() == 0; }
};

}  // namespace minfer
