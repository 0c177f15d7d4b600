// Built against minfer_kernels alone: the bottom room cannot see the GGUF reader.
#include "engine/gguf/gguf.h"

int layering_probe_kernels() { return sizeof(minfer::GGUFFile) > 0; }
