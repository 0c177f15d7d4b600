// The process's place among the ranks of a parallel run (tensor or expert
// parallelism), and how a weight matrix is cut into one rank's shard.
// A world of one (the default) is a single process that holds everything.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/formats/ggml_type.h"

namespace minfer {

struct World {
    int32_t rank = 0;        // 0 .. size-1 over all nodes
    int32_t size = 1;
    int32_t local_rank = 0;  // 0 .. local_size-1 on this node: picks the GPU
    int32_t local_size = 1;  // ranks on this node: they share its cores
};

// The CPU pool size for `threads` (<= 0: the cores of this rank: those of the
// process's affinity mask, divided among the node's ranks, at least 1).
int cpu_threads_for(const World& world, int threads);
// The cores in this process's affinity mask (sched_getaffinity), at least 1.
int affinity_cores();

// Which part of a matrix [rows, cols] a backend packs: shard `index` of
// `count`. dim 0 cuts rows (output features: a column-parallel layer),
// dim 1 cuts columns (input features: a row-parallel layer). count 1: the whole matrix.
struct ShardSpec {
    int32_t dim = 0;
    int32_t index = 0;
    int32_t count = 1;
};

// A shard's place in its parent: rows [row0, row0+rows), columns
// [col0, col0+cols); its first byte lies `offset` bytes into the parent, and
// its rows keep the parent's stride. Throws std::invalid_argument when the
// spec is malformed or a column shard does not start and end on quant-block
// boundaries (dim 1 needs cols divisible by count, into whole blocks).
// Row shards are balanced: shard i holds rows [i*R/count, (i+1)*R/count).
struct ShardRange {
    int64_t row0 = 0, rows = 0;
    int64_t col0 = 0, cols = 0;
    size_t offset = 0;
    size_t row_stride = 0;  // the parent's row bytes
    size_t row_bytes = 0;   // the shard's own row bytes
};
ShardRange shard_range(GGMLType type, int64_t rows, int64_t cols, const ShardSpec& spec, const char* name = "");

}  // namespace minfer
