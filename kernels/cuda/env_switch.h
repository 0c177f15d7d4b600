// The environment switches that turn one CUDA path off to measure it against
// another (MINFER_PDL, MINFER_DECODE_MMA, MINFER_QUANT_MMA): on unless set to "0".
#pragma once

#include <cstdlib>
#include <cstring>

namespace minfer::cuda {

inline bool env_switch_on(const char* name) {
    const char* v = std::getenv(name);
    return !(v && std::strcmp(v, "0") == 0);
}

}  // namespace minfer::cuda
