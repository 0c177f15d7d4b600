#include <mpi.h>

#include <atomic>
#include <climits>
#include <mutex>
#include <thread>

#include "dist/kv_channel.h"
#include "dist/mpi_error.h"

namespace minfer {

namespace {

// Instances under mpirun run one model each (no tensor parallelism), so the
// KV transfer has MPI_COMM_WORLD to itself. Every MPI call of it holds this
// lock: the session allows one thread in MPI at a time.
std::mutex& mpi_lock() {
    static std::mutex m;
    return m;
}

constexpr int kHelloTag = 0;
constexpr auto kNap = std::chrono::microseconds(200);

// Its first call takes mpi_lock(): never call it first with the lock held.
MPI_Comm kv_comm() {
    static const MPI_Comm comm = [] {
        std::lock_guard lock(mpi_lock());
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        return MPI_COMM_WORLD;
    }();
    return comm;
}

// Polls `request` to completion, napping between tests; cancels it at the deadline.
void wait_polled(MPI_Request& request, std::chrono::milliseconds timeout, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        int done = 0;
        {
            std::lock_guard lock(mpi_lock());
            check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
        }
        if (done) return;
        if (std::chrono::steady_clock::now() > deadline) {
            std::lock_guard lock(mpi_lock());
            MPI_Cancel(&request);
            MPI_Request_free(&request);
            throw KVTransferError(std::string("the KV transfer's peer did not answer (") + what + ")");
        }
        std::this_thread::sleep_for(kNap);
    }
}

class MpiChannel final : public KVChannel {
public:
    MpiChannel(int32_t peer, int tag, std::chrono::milliseconds timeout) : peer_(peer), tag_(tag), timeout_(timeout) {
        (void)kv_comm();  // initialised before any call below takes the lock
    }

    void send(std::span<const std::byte> message) override {
        if (message.size() > size_t(INT_MAX)) throw KVTransferError("a KV transfer message over 2 GiB");
        MPI_Request request;
        {
            std::lock_guard lock(mpi_lock());
            check_mpi(MPI_Isend(message.data(), int(message.size()), MPI_BYTE, peer_, tag_, kv_comm(), &request),
                      "MPI_Isend");
        }
        wait_polled(request, timeout_, "MPI_Isend");
    }

    std::vector<std::byte> receive(size_t max_bytes) override {
        const auto deadline = std::chrono::steady_clock::now() + timeout_;
        while (true) {
            {
                std::lock_guard lock(mpi_lock());
                int found = 0;
                MPI_Message handle;
                MPI_Status status;
                check_mpi(MPI_Improbe(peer_, tag_, kv_comm(), &found, &handle, &status), "MPI_Improbe");
                if (found) {
                    int count = 0;
                    MPI_Get_count(&status, MPI_BYTE, &count);
                    std::vector<std::byte> message(size_t(std::max(count, 0)));
                    // Received even when too big, so that it does not stay queued.
                    check_mpi(MPI_Mrecv(message.data(), count, MPI_BYTE, &handle, MPI_STATUS_IGNORE), "MPI_Mrecv");
                    if (message.size() > max_bytes)
                        throw KVTransferError("a KV transfer message of " + std::to_string(message.size()) +
                                              " bytes, over the limit of " + std::to_string(max_bytes));
                    return message;
                }
            }
            if (std::chrono::steady_clock::now() > deadline)
                throw KVTransferError("the KV transfer's peer (rank " + std::to_string(peer_) + ") went silent");
            std::this_thread::sleep_for(kNap);
        }
    }

    int32_t peer_;
    int tag_;
    std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<KVChannel> mpi_connect(int32_t peer, std::chrono::milliseconds timeout) {
    static std::atomic<int> next_tag{1};
    int size = 0, rank = 0, *tag_ub = nullptr, has_ub = 0;
    const MPI_Comm comm = kv_comm();  // first use: it takes the lock itself
    {
        std::lock_guard lock(mpi_lock());
        MPI_Comm_size(comm, &size);
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &has_ub);
    }
    if (peer < 0 || peer >= size || peer == rank)
        throw KVTransferError("mpi://" + std::to_string(peer) + " is not another rank of this job of " +
                              std::to_string(size));
    const int ub = has_ub && tag_ub ? *tag_ub : 32767;
    const int tag = 1 + (next_tag++ - 1) % (ub - 1);
    auto channel = std::make_unique<MpiChannel>(peer, tag, timeout);
    MpiChannel hello(peer, kHelloTag, timeout);
    const int32_t said = tag;
    hello.send(std::as_bytes(std::span(&said, 1)));
    return channel;
}

MpiKVListener::MpiKVListener(std::chrono::milliseconds timeout) : timeout_(timeout) { (void)kv_comm(); }

std::unique_ptr<KVChannel> MpiKVListener::accept() {
    while (!closed_) {
        int found = 0;
        int32_t tag = 0;
        MPI_Status status;
        {
            std::lock_guard lock(mpi_lock());
            MPI_Message handle;
            check_mpi(MPI_Improbe(MPI_ANY_SOURCE, kHelloTag, kv_comm(), &found, &handle, &status), "MPI_Improbe");
            if (found) check_mpi(MPI_Mrecv(&tag, 1, MPI_INT32_T, &handle, &status), "MPI_Mrecv");
        }
        if (found && tag > 0) return std::make_unique<MpiChannel>(status.MPI_SOURCE, tag, timeout_);
        if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return nullptr;
}

}  // namespace minfer
