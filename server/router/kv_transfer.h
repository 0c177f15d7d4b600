// The router's half of the KV-transfer contract with `minfer serve` instances
// (server/README.md, "server/router/"): where a decode instance receives KV,
// and the two bodies one client request becomes. A prefill instance computes
// the prompt's KV and sends it to the decode instance's address under a
// transfer id; the decode instance, given the same id, starts from that KV and
// generates. Pure functions of JSON, so the rules are in one place.
#pragma once

#include <boost/json.hpp>
#include <string>

namespace minfer::router {

// The address in a decode instance's answer to GET /v1/kv_transfer
// ({"role": "decode", "address": "tcp://HOST:PORT" or "mpi://RANK", ...}).
// A wildcard host (0.0.0.0, ::) is where the instance listens, not where it
// is reached: it becomes `instance_host`, the host of the instance's URL.
// Throws std::invalid_argument saying why the answer is unusable.
std::string decode_address_from(const std::string& answer, const std::string& instance_host);

// 16 random bytes in hex: names one request's KV between its two instances.
std::string new_transfer_id();

// The prefill instance's request: the client's body made to stop after the
// prompt (max_tokens 1, not streamed, one choice) and to send its KV on.
// min_tokens goes too: a client's min_tokens above 1 would make the instance
// refuse max_tokens 1.
boost::json::object prefill_body(const boost::json::object& client, const std::string& decode_address,
                                 const std::string& transfer_id);
// The decode instance's request: the client's body as it came, plus the id
// of the KV it waits for.
boost::json::object decode_body(const boost::json::object& client, const std::string& transfer_id);

// A prefill instance's 502 {"error": {"type": "kv_transfer_error"}}: it could
// not deliver the KV, so the decode instance is the one at fault.
bool is_kv_transfer_error(int status, const std::string& body);

// The "message" of an OpenAI error body, or "" (for logs).
std::string error_message_of(const std::string& body);

}  // namespace minfer::router
