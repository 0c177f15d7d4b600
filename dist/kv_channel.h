// The wire of a KV transfer: whole messages of bytes, in order, between one
// sender (a prefill instance) and one receiver (a decode instance).
//  - TCP between separately launched servers: a decode instance listens
//    (--kv-transfer-port), a sender connects once per transfer. A message is
//    its length (8 bytes, little-endian) and its bytes.
//  - MPI between instances launched together by mpirun (one instance per
//    rank): a sender says hello on tag 0 with a conversation tag of its own,
//    and the conversation goes on under that tag. Every call is non-blocking
//    and polled under one lock (MPI_THREAD_SERIALIZED), napping between polls,
//    so two transfers in one process never deadlock and no core spins.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace minfer {

// A transfer that failed: the peer is gone, answered no, or sent garbage.
struct KVTransferError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class KVChannel {
public:
    virtual ~KVChannel() = default;
    virtual void send(std::span<const std::byte> message) = 0;
    // The next message; more than max_bytes, or nothing within the timeout, is a KVTransferError.
    virtual std::vector<std::byte> receive(size_t max_bytes) = 0;
};

// Where a receiver listens: "tcp://HOST:PORT" or "mpi://RANK".
struct KVAddress {
    enum Kind { Tcp, Mpi } kind = Tcp;
    std::string host;
    uint16_t port = 0;
    int32_t rank = 0;
    std::string text() const;
};
KVAddress parse_kv_address(const std::string& text);  // throws KVTransferError

// ---- TCP
std::unique_ptr<KVChannel> tcp_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

class TcpKVListener {
public:
    TcpKVListener(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);  // port 0: any
    ~TcpKVListener();
    TcpKVListener(const TcpKVListener&) = delete;
    TcpKVListener& operator=(const TcpKVListener&) = delete;
    uint16_t port() const { return port_; }
    // The next connection, or null once close() was called.
    std::unique_ptr<KVChannel> accept();
    void close();  // any thread

private:
    int fd_ = -1;
    uint16_t port_ = 0;
    std::chrono::milliseconds timeout_;
    volatile bool closed_ = false;
};

// ---- MPI (MPI must be initialised: dist/mpi_session.h)
// A sender's conversation with rank `peer` (says hello on opening).
std::unique_ptr<KVChannel> mpi_connect(int32_t peer, std::chrono::milliseconds timeout);

class MpiKVListener {
public:
    explicit MpiKVListener(std::chrono::milliseconds timeout);
    // The next conversation a sender opens, or null once close() was called.
    std::unique_ptr<KVChannel> accept();
    void close() { closed_ = true; }

private:
    std::chrono::milliseconds timeout_;
    volatile bool closed_ = false;
};

}  // namespace minfer
