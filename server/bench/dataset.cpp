#include "server/bench/dataset.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "engine/text/tokenizer.h"

namespace minfer::bench {

namespace {

// Ids that decode to plain text: control, unknown and byte tokens would
// decode to nothing or to U+FFFD and never round-trip.
std::vector<int32_t> text_token_ids(const Tokenizer& tok) {
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < tok.vocab_size(); id++)
        if (tok.token_type(id) == TokenType::Normal) ids.push_back(id);
    if (ids.empty())
        for (int32_t id = 0; id < tok.vocab_size(); id++)
            if (tok.token_type(id) != TokenType::Control) ids.push_back(id);
    if (ids.empty()) throw std::runtime_error("the tokenizer has no text tokens to make random prompts from");
    return ids;
}

std::string fit_to_len(const Tokenizer& tok, const std::vector<int32_t>& pool, int32_t len, std::mt19937_64& rng) {
    std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
    std::vector<int32_t> ids(static_cast<size_t>(len));
    for (int32_t& id : ids) id = pool[pick(rng)];
    std::string best;
    size_t best_miss = SIZE_MAX;
    // Decoding then encoding merges or splits pieces, so the count drifts;
    // cut or pad and try again. A few rounds settle almost always.
    for (int round = 0; round < 16; round++) {
        std::string text = tok.decode(ids);
        ids = tok.encode(text, false);
        const size_t miss = ids.size() > static_cast<size_t>(len) ? ids.size() - len : len - ids.size();
        if (miss < best_miss) best_miss = miss, best = text;
        if (miss == 0) return text;
        if (ids.size() > static_cast<size_t>(len)) ids.resize(static_cast<size_t>(len));
        while (ids.size() < static_cast<size_t>(len)) ids.push_back(pool[pick(rng)]);
    }
    return best;
}

int32_t count_tokens(const Tokenizer& tok, const std::string& text) {
    return static_cast<int32_t>(tok.encode(text, false).size());
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

std::string text_of_token_len(const Tokenizer& tok, int32_t len, uint64_t seed) {
    std::mt19937_64 rng(seed);
    return fit_to_len(tok, text_token_ids(tok), len, rng);
}

std::vector<BenchPrompt> random_prompts(const Tokenizer& tok, size_t n, int32_t input_len, int32_t output_len,
                                        double range_ratio, uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto length = [&](int32_t mean) {
        const int32_t lo = std::max(1, static_cast<int32_t>(std::floor(mean * (1 - range_ratio))));
        const int32_t hi = std::max(lo, static_cast<int32_t>(std::ceil(mean * (1 + range_ratio))));
        return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
    };
    const std::vector<int32_t> pool = text_token_ids(tok);
    std::vector<BenchPrompt> out(n);
    for (BenchPrompt& p : out) {
        const int32_t in_len = length(input_len);
        p.output_len = length(output_len);
        p.prompt = fit_to_len(tok, pool, in_len, rng);
        p.prompt_len = count_tokens(tok, p.prompt);
    }
    return out;
}

std::vector<BenchPrompt> sharegpt_prompts(const Tokenizer& tok, const std::string& path, size_t n, uint64_t seed) {
    boost::json::value doc;
    try {
        doc = boost::json::parse(read_file(path));
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error(path + ": not JSON (" + e.what() + ")");
    }
    if (!doc.is_array()) throw std::runtime_error(path + ": a ShareGPT file is a JSON list of conversations");
    // (prompt, completion) of each conversation that has both.
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto& entry : doc.as_array()) {
        const auto* conv = entry.is_object() ? entry.as_object().if_contains("conversations") : nullptr;
        if (!conv || !conv->is_array()) continue;
        const boost::json::string *prompt = nullptr, *answer = nullptr;
        for (const auto& turn : conv->as_array()) {
            const auto* t = turn.if_object();
            const auto* from = t ? t->if_contains("from") : nullptr;
            const auto* value = t ? t->if_contains("value") : nullptr;
            if (!from || !from->is_string() || !value || !value->is_string()) continue;
            if (!prompt && from->as_string() == "human") prompt = &value->as_string();
            else if (prompt && from->as_string() == "gpt") {
                answer = &value->as_string();
                break;
            }
        }
        if (prompt && answer) pairs.emplace_back(std::string(*prompt), std::string(*answer));
    }
    std::mt19937_64 rng(seed);
    std::shuffle(pairs.begin(), pairs.end(), rng);
    std::vector<BenchPrompt> out;
    for (auto& [prompt, answer] : pairs) {
        if (out.size() >= n) break;
        const int32_t prompt_len = count_tokens(tok, prompt);
        const int32_t output_len = count_tokens(tok, answer);
        if (prompt_len < 4 || output_len < 4 || prompt_len > 1024 || prompt_len + output_len > 2048) continue;
        out.push_back({std::move(prompt), prompt_len, output_len});
    }
    if (out.empty()) throw std::runtime_error(path + ": no usable human/gpt conversation pairs");
    return out;
}

std::vector<BenchPrompt> jsonl_prompts(const Tokenizer& tok, const std::string& path, size_t n,
                                       int32_t default_output_len) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::vector<BenchPrompt> out;
    std::string line;
    for (size_t line_no = 1; std::getline(in, line) && (n == 0 || out.size() < n); line_no++) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(line_no);
        boost::json::value v;
        try {
            v = boost::json::parse(line);
        } catch (const boost::system::system_error&) {
            throw std::runtime_error(where + ": not a JSON object");
        }
        const auto* obj = v.if_object();
        const auto* prompt = obj ? obj->if_contains("prompt") : nullptr;
        if (!prompt || !prompt->is_string()) throw std::runtime_error(where + ": wants a string \"prompt\"");
        BenchPrompt p;
        p.prompt = std::string(prompt->as_string());
        p.prompt_len = count_tokens(tok, p.prompt);
        p.output_len = default_output_len;
        if (const auto* mt = obj->if_contains("max_tokens")) {
            if (!mt->is_int64() || mt->as_int64() <= 0) throw std::runtime_error(where + ": max_tokens must be a positive integer");
            p.output_len = static_cast<int32_t>(mt->as_int64());
        }
        out.push_back(std::move(p));
    }
    if (out.empty()) throw std::runtime_error(path + ": no prompts");
    return out;
}

}  // namespace minfer::bench
