#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "dist/kv_channel.h"

namespace minfer {

namespace {

[[noreturn]] void fail(const std::string& what) { throw KVTransferError(what + ": " + std::strerror(errno)); }

// Waits until fd is ready for `events`; false on timeout.
bool wait_fd(int fd, short events, std::chrono::milliseconds timeout) {
    pollfd p{fd, events, 0};
    int rc;
    do rc = ::poll(&p, 1, int(timeout.count()));
    while (rc < 0 && errno == EINTR);
    if (rc < 0) fail("poll");
    return rc > 0;
}

class TcpChannel final : public KVChannel {
public:
    TcpChannel(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {
        const int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    ~TcpChannel() override { ::close(fd_); }

    void send(std::span<const std::byte> message) override {
        uint8_t header[8];
        for (int i = 0; i < 8; ++i) header[i] = uint8_t(uint64_t(message.size()) >> (8 * i));
        write_all(header, sizeof header);
        write_all(message.data(), message.size());
    }

    std::vector<std::byte> receive(size_t max_bytes) override {
        uint8_t header[8];
        read_all(header, sizeof header);
        uint64_t n = 0;
        for (int i = 0; i < 8; ++i) n |= uint64_t(header[i]) << (8 * i);
        if (n > max_bytes)
            throw KVTransferError("a KV transfer message of " + std::to_string(n) + " bytes, over the limit of " +
                                  std::to_string(max_bytes));
        std::vector<std::byte> message(n);
        read_all(message.data(), n);
        return message;
    }

private:
    void write_all(const void* data, size_t n) {
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
            if (!wait_fd(fd_, POLLOUT, timeout_)) throw KVTransferError("the KV transfer's peer reads nothing");
            const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
            if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (k <= 0) fail("sending KV");
            p += k;
            n -= size_t(k);
        }
    }
    void read_all(void* data, size_t n) {
        char* p = static_cast<char*>(data);
        while (n > 0) {
            if (!wait_fd(fd_, POLLIN, timeout_)) throw KVTransferError("the KV transfer's peer went silent");
            const ssize_t k = ::recv(fd_, p, n, 0);
            if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (k == 0) throw KVTransferError("the KV transfer's peer closed the connection");
            if (k < 0) fail("receiving KV");
            p += k;
            n -= size_t(k);
        }
    }

    int fd_;
    std::chrono::milliseconds timeout_;
};

}  // namespace

std::string KVAddress::text() const {
    return kind == Mpi ? "mpi://" + std::to_string(rank) : "tcp://" + host + ":" + std::to_string(port);
}

KVAddress parse_kv_address(const std::string& text) {
    auto bad = [&] {
        throw KVTransferError("a KV transfer address is tcp://HOST:PORT or mpi://RANK, got '" + text + "'");
    };
    auto number = [&](std::string_view s, int64_t max) {
        int64_t v = -1;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) bad();
        return v;
    };
    KVAddress a;
    if (text.starts_with("mpi://")) {
        a.kind = KVAddress::Mpi;
        a.rank = int32_t(number(std::string_view(text).substr(6), 1 << 30));
        return a;
    }
    if (!text.starts_with("tcp://")) bad();
    const std::string rest = text.substr(6);
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) bad();
    a.host = rest.substr(0, colon);
    if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
    a.port = uint16_t(number(std::string_view(rest).substr(colon + 1), 65535));
    if (a.port == 0) bad();
    return a;
}

std::unique_ptr<KVChannel> tcp_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string where = host + ":" + std::to_string(port);
    if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
        throw KVTransferError("KV transfer to " + where + ": " + ::gai_strerror(rc));
    std::string error = "no address";
    for (addrinfo* ai = found; ai; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc < 0 && errno == EINPROGRESS) {
            if (wait_fd(fd, POLLOUT, timeout)) {
                int so_error = 0;
                socklen_t len = sizeof so_error;
                ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
                errno = so_error;
                rc = so_error == 0 ? 0 : -1;
            } else {
                errno = ETIMEDOUT;
            }
        }
        if (rc == 0) {
            ::freeaddrinfo(found);
            return std::make_unique<TcpChannel>(fd, timeout);
        }
        error = std::strerror(errno);
        ::close(fd);
    }
    ::freeaddrinfo(found);
    throw KVTransferError("KV transfer to " + where + ": " + error);
}

TcpKVListener::TcpKVListener(const std::string& host, uint16_t port, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
        throw KVTransferError("--kv-transfer-port: cannot listen on " + host + ": " + ::gai_strerror(rc));
    fd_ = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd_ < 0 || ::bind(fd_, found->ai_addr, found->ai_addrlen) < 0 || ::listen(fd_, 64) < 0) {
        const std::string why = std::strerror(errno);
        ::freeaddrinfo(found);
        if (fd_ >= 0) ::close(fd_);
        throw KVTransferError("--kv-transfer-port: cannot listen on " + host + ":" + std::to_string(port) + ": " + why);
    }
    ::freeaddrinfo(found);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

TcpKVListener::~TcpKVListener() { ::close(fd_); }

void TcpKVListener::close() { closed_ = true; }

std::unique_ptr<KVChannel> TcpKVListener::accept() {
    while (!closed_) {
        // Wake now and then to see close(): closing the socket under a blocked accept is not portable.
        if (!wait_fd(fd_, POLLIN, std::chrono::milliseconds(100))) continue;
        const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) return std::make_unique<TcpChannel>(fd, timeout_);
    }
    return nullptr;
}

}  // namespace minfer
