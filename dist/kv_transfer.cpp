#include "dist/kv_transfer.h"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <cstring>

namespace minfer {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxHeaderBytes = size_t(64) << 20;  // a header lists the prompt's tokens

std::vector<std::byte> to_bytes(const json::value& v) {
    const std::string s = json::serialize(v);
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    return {p, p + s.size()};
}

json::object from_bytes(const std::vector<std::byte>& message) {
    boost::system::error_code ec;
    json::value v = json::parse(std::string_view(reinterpret_cast<const char*>(message.data()), message.size()), ec);
    if (ec || !v.is_object()) throw KVTransferError("a KV transfer message that is not a JSON object");
    return std::move(v.as_object());
}

// A reply: {ok: true, ...} or {ok: false, error}.
json::object expect_ok(KVChannel& channel) {
    json::object reply = from_bytes(channel.receive(1 << 20));
    const json::value* ok = reply.if_contains("ok");
    if (!ok || !ok->is_bool()) throw KVTransferError("a KV transfer reply without 'ok'");
    if (!ok->get_bool()) {
        const json::value* e = reply.if_contains("error");
        throw KVTransferError(e && e->is_string() ? std::string(e->get_string()) : "the receiver refused the KV");
    }
    return reply;
}

template <class T>
std::vector<T> number_array(const json::object& o, const char* key) {
    const json::value* v = o.if_contains(key);
    if (!v || !v->is_array()) throw KVTransferError(fmt::format("a KV transfer header without '{}'", key));
    std::vector<T> out;
    out.reserve(v->as_array().size());
    for (const json::value& x : v->as_array()) {
        if (!x.is_int64() && !x.is_uint64()) throw KVTransferError(fmt::format("'{}' must hold integers", key));
        out.push_back(x.is_uint64() ? T(x.get_uint64()) : T(x.get_int64()));
    }
    return out;
}

}  // namespace

KVTransfer::KVTransfer(EngineThread& engine, const KVTransferOptions& options) : engine_(engine), options_(options) {
    engine_.call([&](LLMEngine& e) {
        const KVCacheShape& s = e.kv_shape();
        layout_ = {s.n_layers, s.n_kv_heads, s.head_dim, s.block_size, kv_dtype_name(s.dtype), s.bytes_per_block()};
        staged_ = e.staged_kv();
    });
    if (options_.receive && options_.tcp_port >= 0) {
        tcp_ = std::make_unique<TcpKVListener>(options_.listen_host, uint16_t(options_.tcp_port), options_.timeout);
        listeners_.emplace_back([this] { listen([this] { return tcp_->accept(); }); });
    }
    if (options_.receive && options_.mpi) {
        mpi_ = std::make_unique<MpiKVListener>(options_.timeout);
        listeners_.emplace_back([this] { listen([this] { return mpi_->accept(); }); });
    }
}

KVTransfer::~KVTransfer() { stop(); }

std::string KVTransfer::address() const {
    KVAddress a;
    if (tcp_) {
        a.host = options_.listen_host;
        a.port = tcp_->port();
        return a.host.find(':') != std::string::npos ? fmt::format("tcp://[{}]:{}", a.host, a.port) : a.text();
    }
    if (mpi_) {
        a.kind = KVAddress::Mpi;
        a.rank = options_.mpi_rank;
        return a.text();
    }
    return "";
}

void KVTransfer::stop() {
    if (stopping_.exchange(true)) return;
    if (tcp_) tcp_->close();
    if (mpi_) mpi_->close();
    for (std::thread& t : listeners_) t.join();
    std::lock_guard lock(conversations_mutex_);
    for (Conversation& c : conversations_) c.thread.join();
    conversations_.clear();
}

KVTransferStats KVTransfer::stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
}

void KVTransfer::finished(bool ok, double seconds) {
    std::lock_guard lock(stats_mutex_);
    --stats_.in_transfer;
    if (!ok) {
        ++stats_.failed;
        return;
    }
    for (size_t i = 0; i < std::size(kKVTransferBuckets); ++i)
        if (seconds <= kKVTransferBuckets[i]) ++stats_.seconds_buckets[i];
    stats_.seconds_sum += seconds;
    ++stats_.seconds_count;
}

json::object KVTransfer::layout_json() const {
    return {{"n_layers", layout_.n_layers},
            {"n_kv_heads", layout_.n_kv_heads},
            {"head_dim", layout_.head_dim},
            {"block_size", layout_.block_size},
            {"dtype", layout_.dtype}};
}

// ---- the sender

KVSendReport KVTransfer::send(const std::string& id, const std::string& address_text) {
    const Clock::time_point began = Clock::now();
    {
        std::lock_guard lock(stats_mutex_);
        ++stats_.in_transfer;
    }
    KVSendReport report;
    try {
        // Taken whatever happens next: a failed send drops it.
        const std::optional<StagedKV> kv = staged_->take(id);
        if (!kv) throw KVTransferError(fmt::format("no prompt staged under KV transfer id {}", id));
        const KVAddress to = parse_kv_address(address_text);
        if (to.kind == KVAddress::Mpi && !options_.mpi)
            throw KVTransferError(fmt::format("{}: this instance was not started by mpirun", address_text));
        std::unique_ptr<KVChannel> channel = to.kind == KVAddress::Mpi
                                                 ? mpi_connect(to.rank, options_.timeout)
                                                 : tcp_connect(to.host, to.port, options_.timeout);
        const json::object header{{"transfer_id", id},
                                  {"layout", layout_json()},
                                  {"tokens", json::value_from(kv->tokens)},
                                  {"hashes", json::value_from(kv->hashes)}};
        channel->send(to_bytes(header));
        const json::object reply = expect_ok(*channel);
        const json::value* have_v = reply.if_contains("have");
        const int64_t have = have_v && have_v->is_int64() ? have_v->get_int64() : -1;
        if (have < 0 || have > kv->num_blocks) throw KVTransferError("a KV transfer reply with a bad 'have'");
        // One message a layer: K of the blocks the receiver lacks, then their V.
        const size_t half = size_t(kv->num_blocks - have) * kv->bytes_per_block;
        std::vector<std::byte> layer(2 * half);
        for (int32_t l = 0; l < layout_.n_layers; ++l) {
            std::memcpy(layer.data(), kv->k(l, int32_t(have)), half);
            std::memcpy(layer.data() + half, kv->v(l, int32_t(have)), half);
            channel->send(layer);
        }
        expect_ok(*channel);
        report.blocks_sent = int32_t(kv->num_blocks - have);
        report.blocks_reused = int32_t(have);
        report.bytes = int64_t(layer.size()) * layout_.n_layers;
        report.seconds = std::chrono::duration<double>(Clock::now() - began).count();
    } catch (...) {
        finished(false, 0);
        throw;
    }
    {
        std::lock_guard lock(stats_mutex_);
        stats_.sent_blocks += report.blocks_sent;
        stats_.reused_blocks += report.blocks_reused;
        stats_.sent_bytes += report.bytes;
    }
    finished(true, report.seconds);
    return report;
}

// ---- the receiver

void KVTransfer::listen(std::function<std::unique_ptr<KVChannel>()> accept) {
    while (!stopping_) {
        std::unique_ptr<KVChannel> channel;
        try {
            channel = accept();
        } catch (const std::exception&) {  // a garbled hello: wait for the next one
            continue;
        }
        if (!channel) return;
        std::lock_guard lock(conversations_mutex_);
        for (auto it = conversations_.begin(); it != conversations_.end();) {
            if (!it->done) {
                ++it;
                continue;
            }
            it->thread.join();
            it = conversations_.erase(it);
        }
        Conversation& c = conversations_.emplace_back();
        c.thread = std::thread([this, &c, ch = std::move(channel)] {
            receive(*ch);
            c.done = true;
        });
    }
}

void KVTransfer::receive(KVChannel& channel) {
    const Clock::time_point began = Clock::now();
    {
        std::lock_guard lock(stats_mutex_);
        ++stats_.in_transfer;
    }
    std::string id;
    bool parked = false;
    try {
        const json::object header = from_bytes(channel.receive(kMaxHeaderBytes));
        const json::value* id_v = header.if_contains("transfer_id");
        if (!id_v || !id_v->is_string() || id_v->get_string().empty())
            throw KVTransferError("a KV transfer header without 'transfer_id'");
        id = std::string(id_v->get_string());
        const json::value* lay = header.if_contains("layout");
        const json::object mine = layout_json();
        if (!lay || !lay->is_object() || lay->as_object() != mine)
            throw KVTransferError(fmt::format("the sender's KV layout {} differs from this instance's {}: both "
                                              "sides need the same model, block size and KV dtype",
                                              lay ? json::serialize(*lay) : "(none)", json::serialize(mine)));
        std::vector<int32_t> tokens = number_array<int32_t>(header, "tokens");
        const std::vector<uint64_t> hashes = number_array<uint64_t>(header, "hashes");
        const LLMEngine::IncomingKV in =
            engine_.call([&](LLMEngine& e) { return e.begin_incoming_kv(id, std::move(tokens), hashes); });
        parked = true;
        channel.send(to_bytes(json::object{{"ok", true}, {"have", in.have}}));
        const std::span<const int32_t> blocks = std::span(in.blocks).subspan(size_t(in.have));
        const size_t half = blocks.size() * layout_.bytes_per_block;
        std::vector<std::vector<std::byte>> layers;
        for (int32_t l = 0; l < layout_.n_layers; ++l) {
            layers.push_back(channel.receive(2 * half));
            if (layers.back().size() != 2 * half)
                throw KVTransferError(fmt::format("layer {} of the KV transfer has {} bytes, not {}", l,
                                                  layers.back().size(), 2 * half));
        }
        engine_.call([&](LLMEngine& e) {
            for (int32_t l = 0; l < layout_.n_layers; ++l)
                e.write_kv_blocks(blocks, l, layers[l].data(), layers[l].data() + half);
            e.finish_incoming_kv(id);
        });
        channel.send(to_bytes(json::object{{"ok", true}}));
        {
            std::lock_guard lock(stats_mutex_);
            stats_.received_blocks += int64_t(blocks.size());
            stats_.received_bytes += int64_t(2 * half * size_t(layout_.n_layers));
        }
        finished(true, std::chrono::duration<double>(Clock::now() - began).count());
    } catch (const std::exception& e) {
        if (parked) {
            try {
                engine_.call([&](LLMEngine& en) { en.release_parked_kv(id); });
            } catch (const std::exception&) {
            }
        }
        try {
            channel.send(to_bytes(json::object{{"ok", false}, {"error", e.what()}}));
        } catch (const std::exception&) {  // the sender is gone
        }
        finished(false, 0);
    }
}

}  // namespace minfer
