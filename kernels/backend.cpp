#include "kernels/backend.h"

#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

#ifdef MINFER_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace minfer {

float* Backend::upload_vector(std::span<const float> v) {
    auto* p = static_cast<float*>(alloc(v.size_bytes()));
    upload(p, v.data(), v.size_bytes());
    return p;
}

void set_expert_shape(PackedExperts& x, const WeightView& all, int32_t n_experts, const std::string& backend) {
    if (n_experts <= 0 || all.rows % n_experts != 0)
        throw std::invalid_argument(backend + ": expert tensor '" + all.name + "' does not split into " +
                                    std::to_string(n_experts) + " experts");
    x.name = all.name;
    x.type = all.type;
    x.n_experts = n_experts;
    x.rows = all.rows / n_experts;
    x.cols = all.cols;
}

namespace {
[[noreturn]] void no_moe(const Backend& b) {
    throw std::invalid_argument("the " + b.name() + " backend does not run mixture-of-experts models yet");
}
}  // namespace

std::unique_ptr<PackedExperts> Backend::pack_experts(const WeightView&, int32_t) { no_moe(*this); }
void Backend::moe_route(const float*, int32_t, const MoeRouting&, int32_t*, float*) { no_moe(*this); }
void Backend::moe_experts(const float*, const int32_t*, const float*, int32_t, int32_t, const PackedExperts&,
                          const PackedExperts&, const PackedExperts&, float*) {
    no_moe(*this);
}
void Backend::add_sigmoid_gated(const float*, const float*, int32_t, int32_t, float*) { no_moe(*this); }

namespace {

// Throws std::out_of_range unless every block and the layer are in the pool.
void check_kv_blocks(const KVCacheShape& shape, std::span<const int32_t> blocks, int32_t layer, const char* what) {
    if (layer < 0 || layer >= shape.n_layers) throw std::out_of_range(std::string(what) + ": no layer " + std::to_string(layer));
    for (int32_t b : blocks)
        if (b < 0 || b >= shape.num_blocks) throw std::out_of_range(std::string(what) + ": no block " + std::to_string(b));
}

}  // namespace

void for_each_kv_block_io(const KVCache& cache, std::span<const int32_t> blocks, int32_t layer, const char* what,
                          const std::function<void(size_t i, char* k, char* v, size_t bytes)>& copy) {
    check_kv_blocks(cache.shape, blocks, layer, what);
    const size_t bytes = cache.shape.bytes_per_block();
    for (size_t i = 0; i < blocks.size(); ++i) {
        const size_t at = size_t(blocks[i]) * bytes;
        copy(i, static_cast<char*>(cache.k[size_t(layer)]) + at, static_cast<char*>(cache.v[size_t(layer)]) + at, bytes);
    }
}

void Backend::kv_blocks_to_host(const KVCache& cache, std::span<const int32_t> blocks, int32_t layer, void* k_out,
                                void* v_out) {
    for_each_kv_block_io(cache, blocks, layer, "kv_blocks_to_host", [&](size_t i, char* k, char* v, size_t bytes) {
        download(static_cast<char*>(k_out) + i * bytes, k, bytes);
        download(static_cast<char*>(v_out) + i * bytes, v, bytes);
    });
}

void Backend::kv_blocks_from_host(KVCache& cache, std::span<const int32_t> blocks, int32_t layer, const void* k_in,
                                  const void* v_in) {
    for_each_kv_block_io(cache, blocks, layer, "kv_blocks_from_host", [&](size_t i, char* k, char* v, size_t bytes) {
        upload(k, static_cast<const char*>(k_in) + i * bytes, bytes);
        upload(v, static_cast<const char*>(v_in) + i * bytes, bytes);
    });
}

void check_kv_block_pairs(const KVCacheShape& shape, std::span<const int32_t> src_dst_pairs) {
    if (src_dst_pairs.size() % 2 != 0)
        throw std::invalid_argument("copy_kv_blocks: " + std::to_string(src_dst_pairs.size()) +
                                    " block ids, not (src, dst) pairs");
    for (const int32_t id : src_dst_pairs)
        if (id < 0 || id >= shape.num_blocks)
            throw std::invalid_argument("copy_kv_blocks: block " + std::to_string(id) + " outside the pool's " +
                                        std::to_string(shape.num_blocks));
}

namespace {
size_t meminfo_bytes(const std::string& field) {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    size_t kib = 0;
    while (in >> key >> kib >> unit)
        if (key == field) return kib * 1024;
    return 0;
}
}  // namespace

size_t host_available_memory() { return meminfo_bytes("MemAvailable:"); }
size_t host_total_memory() { return meminfo_bytes("MemTotal:"); }

std::unique_ptr<Backend> make_backend(const std::string& device, int cpu_threads, const BackendOptions& options) {
    const bool fp8 = options.quantization == WeightQuantization::FP8;
    cpu_threads = cpu_threads_for(options.world, cpu_threads);
    if (device == "cpu") {
        if (fp8) throw std::invalid_argument("--quantization fp8 needs --device cuda");
        return make_cpu_backend(cpu_threads);
    }
    if (device == "cuda" || device == "auto") {
#ifdef MINFER_HAVE_CUDA
        try {
            return make_cuda_backend(cuda_device_for(options.world), options);
        } catch (const std::exception&) {
            if (device == "cuda") throw;
        }
#else
        if (device == "cuda") throw std::invalid_argument("this build of minfer has no CUDA backend");
#endif
        if (fp8) throw std::invalid_argument("--quantization fp8 needs --device cuda (no usable GPU found)");
        return make_cpu_backend(cpu_threads);
    }
    throw std::invalid_argument("--device must be cpu, cuda or auto, got '" + device + "'");
}

}  // namespace minfer
