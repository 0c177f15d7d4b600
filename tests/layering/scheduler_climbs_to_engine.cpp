// Built against minfer_scheduler alone: including a room above it must not
// compile (the test expects this build to fail with "file not found").
#include "engine/core/sequence.h"

int layering_probe_climb() { return sizeof(minfer::Sequence) > 0; }
