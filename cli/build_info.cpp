#include "cli/build_info.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <boost/version.hpp>

#ifdef MINFER_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace minfer {

std::string build_info() {
    std::string s = fmt::format("minfer {}\n", MINFER_VERSION);
    s += "backends: cpu";
#ifdef MINFER_HAVE_CUDA
    s += fmt::format(", cuda {}", MINFER_CUDA_VERSION);
#endif
    s += "\n";
#ifdef MINFER_HAVE_CUDA
    s += "cuda devices: " + cuda_status() + "\n";  // compiled in is not the same as usable here
#endif
#ifdef MINFER_HAVE_NCCL
    s += fmt::format("nccl: {}\n", MINFER_NCCL_VERSION);
#endif
#ifdef MINFER_HAVE_MPI
    s += "mpi: yes\n";
#endif
    s += fmt::format("libraries: sentencepiece, boost {}.{}.{}, fmt {}\n", BOOST_VERSION / 100000,
                     BOOST_VERSION / 100 % 1000, BOOST_VERSION % 100, FMT_VERSION);
    return s;
}

}  // namespace minfer
