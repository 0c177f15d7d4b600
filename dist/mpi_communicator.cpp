// The CPU's collectives: MPI on host memory (the CPU backend's allocations).
#include <mpi.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/mpi_error.h"

namespace minfer {

namespace {

// MPI counts are ints: big buffers go in pieces.
constexpr size_t kMaxCount = size_t(1) << 30;

// call(offset, n) for consecutive pieces of at most kMaxCount of count elements.
template <class Call>
void in_pieces(size_t count, Call&& call) {
    for (size_t done = 0; done < count;) {
        const int n = int(std::min(count - done, kMaxCount));
        call(done, n);
        done += size_t(n);
    }
}

class MpiCommunicator final : public Communicator {
public:
    explicit MpiCommunicator(const World& world) : Communicator(world), comm_(duplicate_world()) {}
    ~MpiCommunicator() override { MPI_Comm_free(&comm_); }
    std::string name() const override { return "mpi"; }

    // MPI_SUM of floats is commutative, so every rank gets the same bits
    // (recursive doubling adds a+b on one rank and b+a on the other).
    void all_reduce_sum(float* data, size_t count) override {
        in_pieces(count, [&](size_t at, int n) {
            check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
        });
        floats_reduced_ += count;
    }

    void all_gather(const float* send, size_t count, float* recv) override {
        if (count > kMaxCount) throw std::invalid_argument("all_gather: more than 2^30 floats a rank");
        check_mpi(MPI_Allgather(send, int(count), MPI_FLOAT, recv, int(count), MPI_FLOAT, comm_), "MPI_Allgather");
    }

    void all_to_all_v(const float* send, std::span<const size_t> send_counts, float* recv,
                      std::span<const size_t> recv_counts) override {
        const std::vector<int> sc = ints(send_counts, "all_to_all_v"), rc = ints(recv_counts, "all_to_all_v");
        check_mpi(MPI_Alltoallv(send, sc.data(), offsets(sc).data(), MPI_FLOAT, recv, rc.data(), offsets(rc).data(),
                                MPI_FLOAT, comm_),
                  "MPI_Alltoallv");
    }

    void broadcast(void* data, size_t bytes, int32_t root) override {
        in_pieces(bytes, [&](size_t at, int n) {
            check_mpi(MPI_Bcast(static_cast<char*>(data) + at, n, MPI_BYTE, root, comm_), "MPI_Bcast");
        });
    }

    void send(const void* data, size_t bytes, int32_t peer) override {
        in_pieces(bytes, [&](size_t at, int n) {
            check_mpi(MPI_Send(static_cast<const char*>(data) + at, n, MPI_BYTE, peer, kTag, comm_), "MPI_Send");
        });
    }

    void recv(void* data, size_t bytes, int32_t peer) override {
        in_pieces(bytes, [&](size_t at, int n) {
            check_mpi(MPI_Recv(static_cast<char*>(data) + at, n, MPI_BYTE, peer, kTag, comm_, MPI_STATUS_IGNORE),
                      "MPI_Recv");
        });
    }

private:
    static constexpr int kTag = 17;
    // One count a rank, as MPI takes them, and where each rank's run begins.
    std::vector<int> ints(std::span<const size_t> counts, const char* what) const {
        if (counts.size() != size_t(size()))
            throw std::invalid_argument(std::string(what) + ": " + std::to_string(counts.size()) +
                                        " counts for " + std::to_string(size()) + " ranks");
        std::vector<int> v;
        size_t total = 0;
        for (const size_t c : counts) {
            total += c;
            v.push_back(int(c));
        }
        if (total > kMaxCount) throw std::invalid_argument(std::string(what) + ": more than 2^30 floats");
        return v;
    }
    static std::vector<int> offsets(const std::vector<int>& counts) {
        std::vector<int> at(counts.size(), 0);
        for (size_t r = 1; r < counts.size(); ++r) at[r] = at[r - 1] + counts[r - 1];
        return at;
    }
    MPI_Comm comm_;
};

}  // namespace

#ifdef MINFER_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, Control& control);
#endif

std::unique_ptr<Communicator> make_communicator(Backend& backend, Control& control) {
    if (backend.name() == "cpu") return std::make_unique<MpiCommunicator>(control.world());
#ifdef MINFER_HAVE_NCCL
    return make_nccl_communicator(backend, control);
#else
    throw std::invalid_argument("the " + backend.name() + " backend needs NCCL, which this build of minfer lacks");
#endif
}

}  // namespace minfer
