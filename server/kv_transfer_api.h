// The HTTP side of disaggregation (dist/kv_transfer.h moves the blocks):
//  - a request's "kv_transfer_params", vLLM's field: to a prefill instance
//    {"do_remote_decode": true, "remote_address": "tcp://..."|"mpi://R",
//    "transfer_id": ID}, to a decode instance {"transfer_id": ID};
//  - GET /v1/kv_transfer: the instance's role and where it receives KV, which
//    `minfer router` reads;
//  - the transfer's Prometheus lines.
#pragma once

#include <boost/json.hpp>
#include <optional>
#include <string>

#include "dist/kv_transfer.h"
#include "engine/core/llm_engine.h"

namespace minfer {

// --kv-role: what an instance does in a disaggregated deployment.
enum class KVRole { Both, Prefill, Decode };
KVRole parse_kv_role(const std::string& name);  // throws std::invalid_argument
const char* kv_role_name(KVRole role);

struct KVTransferParams {
    std::string transfer_id;
    bool do_remote_decode = false;   // prefill: send the prompt's KV to remote_address
    std::string remote_address;
};

// The request's kv_transfer_params, if any; throws RequestError on a bad one
// (or one this instance's role cannot serve).
std::optional<KVTransferParams> parse_kv_transfer_params(const boost::json::object& body, KVRole role,
                                                          bool receives);

// GET /v1/kv_transfer's body.
boost::json::object kv_transfer_info(KVRole role, const std::string& address, int32_t block_size);

// What a prefill instance adds to its response once the KV is delivered.
boost::json::object kv_send_report(const std::string& transfer_id, const KVSendReport& report);

// The minfer:kv_transfer_* lines (and requests in transfer) for /metrics.
void render_kv_transfer_metrics(std::string& out, const KVTransferStats& stats, const std::string& model_label);

}  // namespace minfer
