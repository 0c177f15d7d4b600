// The CPU's collectives: MPI on host memory (the CPU backend's allocations).
#include <mpi.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dist/communicator.h"
#include "dist/mpi_error.h"

namespace minfer {

namespace {

// MPI counts are ints: big buffers go in pieces.
constexpr size_t kMaxCount = size_t(1) << 30;

class MpiCommunicator final : public Communicator {
public:
    explicit MpiCommunicator(const World& world) : Communicator(world) {
        check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
        MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    }
    ~MpiCommunicator() override { MPI_Comm_free(&comm_); }
    std::string name() const override { return "mpi"; }

    // MPI_SUM of floats is commutative, so every rank gets the same bits
    // (recursive doubling adds a+b on one rank and b+a on the other).
    void all_reduce_sum(float* data, size_t count) override {
        for (size_t done = 0; done < count;) {
            const int n = int(std::min(count - done, kMaxCount));
            check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + done, n, MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
            done += size_t(n);
        }
        floats_reduced_ += count;
    }

    void all_gather(const float* send, size_t count, float* recv) override {
        if (count > kMaxCount) throw std::invalid_argument("all_gather: more than 2^30 floats a rank");
        check_mpi(MPI_Allgather(send, int(count), MPI_FLOAT, recv, int(count), MPI_FLOAT, comm_), "MPI_Allgather");
    }

private:
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
