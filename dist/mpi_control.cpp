#include "dist/mpi_control.h"

#include "dist/mpi_error.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace minfer {

class MpiControl final : public Control {
public:
    explicit MpiControl(const World& world) : Control(world), comm_(duplicate_world()) {}
    ~MpiControl() override { MPI_Comm_free(&comm_); }

    void send(int32_t command, const std::vector<int32_t>& payload) override;
    int32_t receive(std::vector<int32_t>& payload) override;
    void broadcast(void* data, size_t bytes) override;
    int64_t min(int64_t value) override;
    [[noreturn]] void abort(int code) override;

private:
    MPI_Comm comm_;  // its own (MPI_Comm_dup): control never mixes with tensors
};

void MpiControl::send(int32_t command, const std::vector<int32_t>& payload) {
    int32_t header[2] = {command, int32_t(payload.size())};
    MPI_Request request;
    check_mpi(MPI_Ibcast(header, 2, MPI_INT32_T, 0, comm_, &request), "MPI_Ibcast");
    check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    if (!payload.empty())
        check_mpi(MPI_Bcast(const_cast<int32_t*>(payload.data()), header[1], MPI_INT32_T, 0, comm_),
              "MPI_Bcast");
}

int32_t MpiControl::receive(std::vector<int32_t>& payload) {
    int32_t header[2] = {0, 0};
    MPI_Request request;
    check_mpi(MPI_Ibcast(header, 2, MPI_INT32_T, 0, comm_, &request), "MPI_Ibcast");
    // Poll a hundred times (under load the next step follows within
    // microseconds), then sleep 10 us, 20 us, ... up to a millisecond.
    for (int polls = 0, done = 0;; ++polls) {
        check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) break;
        if (polls >= 100) std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * (polls - 99))));
    }
    payload.resize(size_t(header[1]));
    if (header[1] > 0) check_mpi(MPI_Bcast(payload.data(), header[1], MPI_INT32_T, 0, comm_), "MPI_Bcast");
    return header[0];
}

void MpiControl::broadcast(void* data, size_t bytes) {
    for (size_t done = 0; done < bytes;) {  // MPI counts are ints
        const int chunk = int(std::min<size_t>(bytes - done, size_t(1) << 30));
        check_mpi(MPI_Bcast(static_cast<char*>(data) + done, chunk, MPI_BYTE, 0, comm_), "MPI_Bcast");
        done += size_t(chunk);
    }
}

int64_t MpiControl::min(int64_t value) {
    int64_t out = 0;
    check_mpi(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MIN, comm_), "MPI_Allreduce");
    return out;
}

void MpiControl::abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();  // MPI_Abort does not return
}

std::unique_ptr<Control> make_mpi_control(const World& world) { return std::make_unique<MpiControl>(world); }

}  // namespace minfer
