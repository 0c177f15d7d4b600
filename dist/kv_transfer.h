// Prefill/decode disaggregation's KV transfer: a prefill instance ships the
// K/V blocks of a prompt it has computed to the decode instance that will
// generate the rest (over kv_channel.h's TCP or MPI).
//
// One conversation per request, blocks named by their prefix-cache hash chain:
//
//   sender                                   receiver
//   header {transfer_id, layout, tokens,
//           hashes of the full blocks}  ->
//                                       <-   {ok, have: k}   (k leading blocks already
//                                                             cached here: not sent)
//   layer 0: K then V of blocks k..n    ->
//   ...      (one message per layer)
//   layer L-1                           ->
//                                       <-   {ok}            (parked for the request)
//
// The sender's K/V were copied to host memory by the engine in the step that
// sampled the request's first token (engine/core/parked_kv.h's StagedKV), so
// sending waits for no engine step. The receiver allocates room before any
// byte comes (a full pool answers no at once), and parks the blocks under the
// transfer id until the request that names it arrives or the entry expires.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/json/object.hpp>

#include "dist/kv_channel.h"
#include "engine/core/engine_thread.h"

namespace minfer {

struct KVTransferOptions {
    // Receive over TCP on this port (0: any free port) of listen_host; < 0: not over TCP.
    int32_t tcp_port = -1;
    std::string listen_host = "127.0.0.1";
    // This process is one of several instances mpirun started: receive over
    // MPI (and send to mpi:// addresses).
    bool mpi = false;
    int32_t mpi_rank = 0;
    // Listen for KV (a prefill instance only sends).
    bool receive = true;
    // A conversation whose peer says nothing for this long fails.
    std::chrono::milliseconds timeout{30000};
};

// What one send did, for the prefill instance's response.
struct KVSendReport {
    int32_t blocks_sent = 0;
    int32_t blocks_reused = 0;  // already cached by the receiver: not sent
    int64_t bytes = 0;
    double seconds = 0;
};

// Upper bounds (seconds) of minfer:kv_transfer_seconds's buckets.
inline constexpr double kKVTransferBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

struct KVTransferStats {
    int64_t sent_blocks = 0;
    int64_t reused_blocks = 0;
    int64_t received_blocks = 0;
    int64_t sent_bytes = 0;
    int64_t received_bytes = 0;
    int64_t failed = 0;           // conversations that ended in an error, either side
    int64_t in_transfer = 0;      // conversations in progress
    // Seconds per conversation that succeeded, either side: cumulative counts per bucket, sum, count.
    std::vector<int64_t> seconds_buckets = std::vector<int64_t>(std::size(kKVTransferBuckets), 0);
    double seconds_sum = 0;
    int64_t seconds_count = 0;
};

class KVTransfer {
public:
    // Starts the listeners the options ask for.
    KVTransfer(EngineThread& engine, const KVTransferOptions& options);
    ~KVTransfer();  // stop()
    KVTransfer(const KVTransfer&) = delete;
    KVTransfer& operator=(const KVTransfer&) = delete;

    // Where senders reach this instance: "tcp://HOST:PORT" (TCP first), "mpi://RANK", or "" if it does not receive.
    std::string address() const;
    int32_t block_size() const { return layout_.block_size; }

    // Ships the prompt the engine staged under transfer_id to the receiver at
    // `address` (parse_kv_address) and drops it, sent or not. Blocking: call
    // it off the I/O thread. Throws KVTransferError.
    KVSendReport send(const std::string& transfer_id, const std::string& address);

    KVTransferStats stats() const;
    // Closes the listeners and waits for the conversations in progress.
    void stop();

private:
    struct Layout {
        int32_t n_layers = 0, n_kv_heads = 0, head_dim = 0, block_size = 0;
        std::string dtype;
        size_t bytes_per_block = 0;
    };
    boost::json::object layout_json() const;
    void listen(std::function<std::unique_ptr<KVChannel>()> accept);
    void receive(KVChannel& channel);
    void finished(bool ok, double seconds);

    EngineThread& engine_;
    KVTransferOptions options_;
    Layout layout_;
    std::shared_ptr<StagedKVStore> staged_;  // the engine's: what send() takes
    std::unique_ptr<TcpKVListener> tcp_;
    std::unique_ptr<MpiKVListener> mpi_;
    std::vector<std::thread> listeners_;
    std::mutex conversations_mutex_;
    struct Conversation {
        std::thread thread;
        std::atomic<bool> done{false};
    };
    std::list<Conversation> conversations_;  // a receiving conversation each (joined when done, or at stop)
    std::atomic<bool> stopping_{false};
    mutable std::mutex stats_mutex_;
    KVTransferStats stats_;
};

}  // namespace minfer
