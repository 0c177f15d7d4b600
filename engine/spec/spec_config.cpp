#include "engine/spec/spec_config.h"

#include <fmt/format.h>

#include <stdexcept>

#include <boost/json.hpp>

namespace minfer {

// Beyond this many drafts a step's verification rows are mostly wasted (an
// acceptance rate a of 0.9 still leaves a^16 < 0.2 for the 16th).
constexpr int32_t kMaxSpeculativeTokens = 16;

void SpeculativeConfig::validate() const {
    auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
    if (method == SpeculativeMethod::None) return;
    if (num_speculative_tokens < 1 || num_speculative_tokens > kMaxSpeculativeTokens)
        bad(fmt::format("--num-speculative-tokens must be in 1..{}, got {}", kMaxSpeculativeTokens,
                        num_speculative_tokens));
    if (method == SpeculativeMethod::Ngram &&
        (prompt_lookup_min < 1 || prompt_lookup_max < prompt_lookup_min))
        bad(fmt::format("--prompt-lookup-min and --prompt-lookup-max must satisfy 1 <= min <= max, got {} and {}",
                        prompt_lookup_min, prompt_lookup_max));
    if (method == SpeculativeMethod::Draft && model.empty())
        bad("--speculative-method draft needs --speculative-model FILE");
    if (method != SpeculativeMethod::Draft && !model.empty())
        bad("--speculative-model is for --speculative-method draft");
    if (disable_by_batch_size < 0) bad("--speculative-disable-by-batch-size must be >= 0");
}

SpeculativeMethod parse_speculative_method(std::string_view name) {
    if (name == "ngram" || name == "[ngram]") return SpeculativeMethod::Ngram;
    if (name == "draft" || name == "draft_model") return SpeculativeMethod::Draft;
    throw std::invalid_argument(fmt::format("unknown speculative method '{}' (ngram or draft)", name));
}

const char* speculative_method_name(SpeculativeMethod method) {
    switch (method) {
        case SpeculativeMethod::Ngram: return "ngram";
        case SpeculativeMethod::Draft: return "draft";
        default: return "none";
    }
}

SpeculativeConfig parse_speculative_config(std::string_view json, SpeculativeConfig c) {
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(json, ec);
    if (ec || !v.is_object())
        throw std::invalid_argument("--speculative-config must be a JSON object, e.g. "
                                    "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
    auto integer = [](const boost::json::value& x, std::string_view key) {
        if (!x.is_int64() || x.as_int64() < 0 || x.as_int64() > (int64_t(1) << 30))
            throw std::invalid_argument(fmt::format("--speculative-config: \"{}\" must be a non-negative integer", key));
        return int32_t(x.as_int64());
    };
    auto string = [](const boost::json::value& x, std::string_view key) {
        if (!x.is_string()) throw std::invalid_argument(fmt::format("--speculative-config: \"{}\" must be a string", key));
        return std::string(x.as_string());
    };
    bool has_method = false;
    for (const auto& [key, x] : v.as_object()) {
        if (key == "method") {
            c.method = parse_speculative_method(string(x, key));
            has_method = true;
        } else if (key == "num_speculative_tokens") {
            c.num_speculative_tokens = integer(x, key);
        } else if (key == "prompt_lookup_min") {
            c.prompt_lookup_min = integer(x, key);
        } else if (key == "prompt_lookup_max") {
            c.prompt_lookup_max = integer(x, key);
        } else if (key == "model") {
            c.model = string(x, key);
        } else if (key == "disable_by_batch_size") {
            c.disable_by_batch_size = integer(x, key);
        } else {
            throw std::invalid_argument(fmt::format(
                "--speculative-config: unknown key \"{}\" (method, num_speculative_tokens, prompt_lookup_min, "
                "prompt_lookup_max, model, disable_by_batch_size)",
                std::string_view(key)));
        }
    }
    if (!has_method && !c.model.empty()) c.method = SpeculativeMethod::Draft;
    if (c.method == SpeculativeMethod::None)
        throw std::invalid_argument("--speculative-config needs \"method\" (ngram or draft) or a draft \"model\"");
    c.validate();
    return c;
}

}  // namespace minfer
