#include "engine/backend.h"

namespace minfer {

float* Backend::upload_vector(std::span<const float> v) {
    auto* p = static_cast<float*>(alloc(v.size_bytes()));
    upload(p, v.data(), v.size_bytes());
    return p;
}

}  // namespace minfer
