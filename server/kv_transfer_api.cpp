#include "server/kv_transfer_api.h"

#include <fmt/format.h>

#include <stdexcept>

namespace minfer {

namespace json = boost::json;

KVRole parse_kv_role(const std::string& name) {
    if (name == "both") return KVRole::Both;
    if (name == "prefill") return KVRole::Prefill;
    if (name == "decode") return KVRole::Decode;
    throw std::invalid_argument("--kv-role must be prefill, decode or both, got '" + name + "'");
}

const char* kv_role_name(KVRole role) {
    return role == KVRole::Prefill ? "prefill" : role == KVRole::Decode ? "decode" : "both";
}

std::optional<KVTransferParams> parse_kv_transfer_params(const json::object& body, KVRole role, bool receives) {
    const json::value* v = body.if_contains("kv_transfer_params");
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_object()) throw RequestError("'kv_transfer_params' must be an object");
    const json::object& o = v->as_object();
    for (const auto& [key, value] : o)
        if (key != "transfer_id" && key != "do_remote_decode" && key != "remote_address")
            throw RequestError(fmt::format("'kv_transfer_params' has an unknown field '{}'", std::string(key)));
    KVTransferParams p;
    const json::value* id = o.if_contains("transfer_id");
    if (!id || !id->is_string()) throw RequestError("'kv_transfer_params.transfer_id' must be a string");
    p.transfer_id = std::string(id->get_string());
    if (p.transfer_id.empty() || p.transfer_id.size() > 128 ||
        p.transfer_id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            std::string::npos)
        throw RequestError("'kv_transfer_params.transfer_id' must be 1 to 128 of A-Z a-z 0-9 . _ -");
    if (const json::value* d = o.if_contains("do_remote_decode"); d && !d->is_null()) {
        if (!d->is_bool()) throw RequestError("'kv_transfer_params.do_remote_decode' must be true or false");
        p.do_remote_decode = d->get_bool();
    }
    if (p.do_remote_decode) {
        const json::value* a = o.if_contains("remote_address");
        if (!a || !a->is_string()) throw RequestError("'kv_transfer_params.remote_address' must be a string");
        p.remote_address = std::string(a->get_string());
        try {
            parse_kv_address(p.remote_address);
        } catch (const KVTransferError& e) {
            throw RequestError(e.what());
        }
        if (role == KVRole::Decode) throw RequestError("this instance is a decode instance (--kv-role decode): it sends no KV");
    } else {
        if (role == KVRole::Prefill) throw RequestError("this instance is a prefill instance (--kv-role prefill): it receives no KV");
        if (!receives) throw RequestError("this instance receives no KV (start it with --kv-transfer-port or under mpirun)");
    }
    return p;
}

json::object kv_transfer_info(KVRole role, const std::string& address, int32_t block_size) {
    json::object o{{"role", kv_role_name(role)}, {"block_size", block_size}};
    if (address.empty())
        o["address"] = nullptr;
    else
        o["address"] = address;
    return o;
}

json::object kv_send_report(const std::string& transfer_id, const KVSendReport& r) {
    return {{"transfer_id", transfer_id},
            {"blocks_sent", r.blocks_sent},
            {"blocks_reused", r.blocks_reused},
            {"bytes", r.bytes},
            {"seconds", r.seconds}};
}

void render_kv_transfer_metrics(std::string& out, const KVTransferStats& s, const std::string& label) {
    auto line = [&](const char* name, const char* type, const char* help, const std::string& labels, double value) {
        out += fmt::format("# HELP minfer:{} {}\n# TYPE minfer:{} {}\nminfer:{}{{{}}} {}\n", name, help, name, type,
                           name, labels, value);
    };
    line("kv_transfer_sent_blocks_total", "counter", "KV blocks this instance sent to decode instances.", label,
         double(s.sent_blocks));
    line("kv_transfer_reused_blocks_total", "counter",
         "KV blocks a decode instance already cached, so not sent (named by their prefix-cache hash chain).", label,
         double(s.reused_blocks));
    line("kv_transfer_received_blocks_total", "counter", "KV blocks this instance received from prefill instances.",
         label, double(s.received_blocks));
    out += "# HELP minfer:kv_transfer_bytes_total K/V bytes moved by KV transfers, by direction.\n"
           "# TYPE minfer:kv_transfer_bytes_total counter\n";
    out += fmt::format("minfer:kv_transfer_bytes_total{{{},direction=\"sent\"}} {}\n", label, s.sent_bytes);
    out += fmt::format("minfer:kv_transfer_bytes_total{{{},direction=\"received\"}} {}\n", label, s.received_bytes);
    line("kv_transfer_failures_total", "counter", "KV transfers that failed, either side.", label, double(s.failed));
    line("num_requests_in_kv_transfer", "gauge", "KV transfers in progress, either side.", label,
         double(s.in_transfer));
    out += "# HELP minfer:kv_transfer_seconds Time of one KV transfer (a request's), either side.\n"
           "# TYPE minfer:kv_transfer_seconds histogram\n";
    for (size_t i = 0; i < s.seconds_buckets.size(); ++i)
        out += fmt::format("minfer:kv_transfer_seconds_bucket{{{},le=\"{}\"}} {}\n", label, kKVTransferBuckets[i],
                           s.seconds_buckets[i]);
    out += fmt::format("minfer:kv_transfer_seconds_bucket{{{},le=\"+Inf\"}} {}\n", label, s.seconds_count);
    out += fmt::format("minfer:kv_transfer_seconds_sum{{{}}} {}\nminfer:kv_transfer_seconds_count{{{}}} {}\n", label,
                       s.seconds_sum, label, s.seconds_count);
}

}  // namespace minfer
