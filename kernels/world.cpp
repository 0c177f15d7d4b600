#include "kernels/world.h"

#include <sched.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

namespace minfer {

int affinity_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int cpu_threads_for(const World& world, int threads) {
    if (threads > 0) return threads;
    return std::max(1, affinity_cores() / std::max(1, world.local_size));
}

ShardRange shard_range(GGMLType type, int64_t rows, int64_t cols, const ShardSpec& spec, const char* name) {
    const std::string what = std::string("shard of weight '") + name + "' (" + ggml_type_name(type) + ", " +
                             std::to_string(rows) + "x" + std::to_string(cols) + ")";
    if (spec.count < 1 || spec.index < 0 || spec.index >= spec.count)
        throw std::invalid_argument(what + ": shard index " + std::to_string(spec.index) + " of " +
                                    std::to_string(spec.count) + " is out of range");
    if (spec.dim != 0 && spec.dim != 1)
        throw std::invalid_argument(what + ": shard dim must be 0 (rows) or 1 (columns), got " +
                                    std::to_string(spec.dim));
    const GGMLTypeTraits* t = ggml_type_traits(uint32_t(type));
    if (!t) throw std::invalid_argument(what + ": unknown type");
    ShardRange r;
    r.row_stride = ggml_row_bytes(type, cols);
    r.rows = rows;
    r.cols = cols;
    if (spec.dim == 0) {
        if (spec.count > rows)
            throw std::invalid_argument(what + ": " + std::to_string(spec.count) + " row shards of " +
                                        std::to_string(rows) + " rows");
        r.row0 = rows * spec.index / spec.count;
        r.rows = rows * (spec.index + 1) / spec.count - r.row0;
        r.offset = size_t(r.row0) * r.row_stride;
    } else {
        const int64_t width = cols / spec.count;
        if (cols % spec.count != 0 || width % t->block_elems != 0)
            throw std::invalid_argument(what + ": " + std::to_string(spec.count) +
                                        " column shards are not on quant-block boundaries (each shard must be "
                                        "a whole number of " + std::to_string(t->block_elems) +
                                        "-element blocks, and the columns must divide evenly)");
        r.col0 = width * spec.index;
        r.cols = width;
        r.offset = size_t(r.col0 / t->block_elems) * size_t(t->block_bytes);
    }
    r.row_bytes = ggml_row_bytes(type, r.cols);
    return r;
}

}  // namespace minfer
