// Speculative decoding's settings: serve, generate and run's flags, or vLLM's
// --speculative-config JSON.
//
// A proposer guesses the next k tokens of a sequence cheaply; one forward pass
// of the target model over 1 + k rows then scores them all, and the verifier
// (kernels/sampling.h, sample_row with a draft) keeps the longest run the
// target agrees with, plus one token of its own. The output's distribution is
// the target's alone: speculation changes only the speed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer {

enum class SpeculativeMethod {
    None,
    Ngram,  // prompt lookup: the tokens that followed the last n tokens earlier in the sequence
    Draft,  // a smaller model with the same vocabulary
};

struct SpeculativeConfig {
    SpeculativeMethod method = SpeculativeMethod::None;
    int32_t num_speculative_tokens = 0;  // k: drafts proposed per sequence and step
    // N-gram lookup: the longest n in [min, max] whose last n tokens occur earlier.
    int32_t prompt_lookup_min = 1;
    int32_t prompt_lookup_max = 4;
    std::string model;                   // the draft model's GGUF (method Draft)
    // A step speculates only while at most this many sequences run: past it the
    // batch already fills the device, and verification rows cost more than they
    // save. 0: always.
    int32_t disable_by_batch_size = 0;

    bool enabled() const { return method != SpeculativeMethod::None && num_speculative_tokens > 0; }
    // Throws std::invalid_argument naming the setting that is out of range.
    void validate() const;
};

// "ngram" or "draft" ("[ngram]", vLLM's older spelling, too); throws std::invalid_argument otherwise.
SpeculativeMethod parse_speculative_method(std::string_view name);
const char* speculative_method_name(SpeculativeMethod method);

// Reads vLLM's --speculative-config JSON ({"method", "num_speculative_tokens",
// "prompt_lookup_min", "prompt_lookup_max", "model", "disable_by_batch_size"})
// over `base`; a "model" without a "method" means a draft model. Unknown keys
// and wrong types throw std::invalid_argument naming the key.
SpeculativeConfig parse_speculative_config(std::string_view json, SpeculativeConfig base = {});

}  // namespace minfer
