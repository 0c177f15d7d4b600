#include "engine/gguf/model_source.h"

#include "engine/gguf/synth.h"

namespace minfer {

GGUFFile open_model_source(const std::string& path, const std::string& synthetic_spec, bool weights) {
    if (synthetic_spec.empty()) return GGUFFile::open(path);
    const SynthSpec s = parse_synth_spec(synthetic_spec);
    // The name shows where errors and `inspect` would show a path.
    const std::string name = "synthetic:" + std::string(s.preset->name) + ":" + synth_dtype_name(s.dtype);
    if (!weights) return GGUFFile::from_bytes(synth_header(*s.preset, s.dtype, 0, /*tensors=*/false).to_bytes(), name);
    return GGUFFile::from_bytes(synth_image(*s.preset, s.dtype), name);
}

}  // namespace minfer
