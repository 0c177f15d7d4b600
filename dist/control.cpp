#include "dist/control.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace minfer {

namespace {

MPI_Comm& as_comm(void*& p) { return *reinterpret_cast<MPI_Comm*>(&p); }

void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error(std::string(what) + ": " + std::string(text, size_t(len)));
}

}  // namespace

static_assert(sizeof(MPI_Comm) <= sizeof(void*), "an MPI_Comm is a handle");

Control::Control(const World& world) : world_(world) {
    MPI_Comm dup;
    check(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    as_comm(comm_) = dup;
}

Control::~Control() { MPI_Comm_free(&as_comm(comm_)); }

void Control::send(int32_t command, const std::vector<int32_t>& payload) {
    int32_t header[2] = {command, int32_t(payload.size())};
    MPI_Request request;
    check(MPI_Ibcast(header, 2, MPI_INT32_T, 0, as_comm(comm_), &request), "MPI_Ibcast");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    if (!payload.empty())
        check(MPI_Bcast(const_cast<int32_t*>(payload.data()), header[1], MPI_INT32_T, 0, as_comm(comm_)),
              "MPI_Bcast");
}

int32_t Control::receive(std::vector<int32_t>& payload) {
    int32_t header[2] = {0, 0};
    MPI_Request request;
    check(MPI_Ibcast(header, 2, MPI_INT32_T, 0, as_comm(comm_), &request), "MPI_Ibcast");
    // Poll a hundred times (under load the next step follows within
    // microseconds), then sleep 10 us, 20 us, ... up to a millisecond.
    for (int polls = 0, done = 0;; ++polls) {
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) break;
        if (polls >= 100) std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * (polls - 99))));
    }
    payload.resize(size_t(header[1]));
    if (header[1] > 0) check(MPI_Bcast(payload.data(), header[1], MPI_INT32_T, 0, as_comm(comm_)), "MPI_Bcast");
    return header[0];
}

void Control::broadcast(void* data, size_t bytes) {
    for (size_t done = 0; done < bytes;) {  // MPI counts are ints
        const int chunk = int(std::min<size_t>(bytes - done, size_t(1) << 30));
        check(MPI_Bcast(static_cast<char*>(data) + done, chunk, MPI_BYTE, 0, as_comm(comm_)), "MPI_Bcast");
        done += size_t(chunk);
    }
}

int64_t Control::min(int64_t value) {
    int64_t out = 0;
    check(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MIN, as_comm(comm_)), "MPI_Allreduce");
    return out;
}

void Control::agree(const std::exception_ptr& error) {
    const int64_t failed = min(error ? world_.rank : world_.size);
    if (failed == world_.size) return;
    if (failed == world_.rank) std::rethrow_exception(error);
    throw OtherRankFailed();
}

void Control::abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();  // MPI_Abort does not return
}

}  // namespace minfer
