// The GPUs' collectives: NCCL, one communicator over the group, its calls on
// the backend's stream (so a recorded step, a CUDA graph, holds them too).
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

#include "dist/communicator.h"

namespace minfer {

namespace {

void check(ncclResult_t rc, const char* what) {
    if (rc != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(rc));
}

class NcclCommunicator final : public Communicator {
public:
    NcclCommunicator(Backend& backend, Control& control) : Communicator(control.world()) {
        stream_ = static_cast<cudaStream_t>(backend.native_stream());
        if (!stream_) throw std::invalid_argument("NCCL needs a backend with a CUDA stream, not " + backend.name());
        // Rank 0 makes the group's id; MPI carries it to the others.
        ncclUniqueId id;
        if (control.is_root()) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        control.broadcast(&id, sizeof id);
        check(ncclCommInitRank(&comm_, size(), id, rank()), "ncclCommInitRank");
    }
    ~NcclCommunicator() override { ncclCommDestroy(comm_); }
    std::string name() const override { return "nccl"; }

    void all_reduce_sum(float* data, size_t count) override {
        check(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
        floats_reduced_ += count;
    }
    void all_gather(const float* send, size_t count, float* recv) override {
        check(ncclAllGather(send, recv, count, ncclFloat32, comm_, stream_), "ncclAllGather");
    }

    // NCCL has no all-to-all-v: a send and a receive for every peer, in one group.
    void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                      std::span<const size_t> recv_counts) override {
        if (send_counts.size() != size_t(size()) || recv_counts.size() != size_t(size()))
            throw std::invalid_argument("all_to_all_v: one count a rank");
        check(ncclGroupStart(), "ncclGroupStart");
        size_t s = 0, r = 0;
        for (int32_t peer = 0; peer < size(); ++peer) {
            if (send_counts[size_t(peer)])
                check(ncclSend(send + s, send_counts[size_t(peer)], ncclFloat32, peer, comm_, stream_), "ncclSend");
            if (recv_counts[size_t(peer)])
                check(ncclRecv(recv + r, recv_counts[size_t(peer)], ncclFloat32, peer, comm_, stream_), "ncclRecv");
            s += send_counts[size_t(peer)];
            r += recv_counts[size_t(peer)];
        }
        check(ncclGroupEnd(), "ncclGroupEnd");
    }

    void broadcast(void* data, size_t bytes, int32_t root) override {
        check(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast");
    }
    void send(const void* data, size_t bytes, int32_t peer) override {
        check(ncclSend(data, bytes, ncclUint8, peer, comm_, stream_), "ncclSend");
    }
    void recv(void* data, size_t bytes, int32_t peer) override {
        check(ncclRecv(data, bytes, ncclUint8, peer, comm_, stream_), "ncclRecv");
    }

private:
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, Control& control) {
    return std::make_unique<NcclCommunicator>(backend, control);
}

}  // namespace minfer
