// The prompts a benchmark sends: random ones of exact token lengths, a
// ShareGPT conversation dump, or a JSONL file of {prompt, max_tokens}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace minfer {
class Tokenizer;
}

namespace minfer::bench {

struct BenchPrompt {
    std::string prompt;          // sent as text
    int32_t prompt_len = 0;      // its token count under the benchmark's tokenizer (no BOS)
    int32_t output_len = 0;      // max_tokens
};

// vLLM's random dataset: each prompt has a length drawn uniformly from
// [floor(in*(1-r)), ceil(in*(1+r))] (output likewise). Its text comes from
// random token ids decoded, then re-encoded and cut or padded to the length,
// until decode/encode round-trips to exactly that many tokens.
std::vector<BenchPrompt> random_prompts(const Tokenizer& tok, size_t n, int32_t input_len, int32_t output_len,
                                        double range_ratio, uint64_t seed);

// Text whose encoding (without BOS) is exactly `len` tokens, built from
// random ids as above; best effort after a few rounds (returns the closest).
std::string text_of_token_len(const Tokenizer& tok, int32_t len, uint64_t seed);

// vLLM's sample_sharegpt_requests: a JSON list of {conversations: [{from,
// value}, ...]}, shuffled with the seed; the first human turn is the prompt,
// the token count of the first gpt turn after it the output length; pairs
// with fewer than 4 tokens on either side, a prompt over 1024 tokens or more
// than 2048 together are skipped. Throws std::runtime_error naming the file.
std::vector<BenchPrompt> sharegpt_prompts(const Tokenizer& tok, const std::string& path, size_t n, uint64_t seed);

// One JSON object per line: {"prompt": "...", "max_tokens": N}; lines without
// max_tokens get default_output_len. Takes the first n (all if n == 0).
std::vector<BenchPrompt> jsonl_prompts(const Tokenizer& tok, const std::string& path, size_t n,
                                       int32_t default_output_len);

}  // namespace minfer::bench
