// Where a command's model comes from: a GGUF file, or a synthetic model
// (synth.h) built in memory from "PRESET[:DTYPE]" with no file at all.
#pragma once

#include <string>

#include "engine/gguf/gguf.h"

namespace minfer {

// A non-empty synthetic_spec wins: the model `minfer synth --preset PRESET
// --dtype DTYPE` (seed 0) would write, byte for byte, generated in memory.
// With weights = false it has the metadata and tokenizer only, like a
// vocab-only file (fast: enough for tokenizing). Otherwise the file at `path`
// is memory-mapped. Throws std::invalid_argument for a bad spec, GGUFError for
// a bad file, std::runtime_error when a synthetic model does not fit in memory.
GGUFFile open_model_source(const std::string& path, const std::string& synthetic_spec, bool weights = true);

}  // namespace minfer
