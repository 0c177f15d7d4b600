#include "server/completion_json.h"

#include "engine/grammar/builtin.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace minfer {

namespace json = boost::json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(what); }

double number(const json::value& v, const char* field) {
    if (v.is_double()) return v.get_double();
    if (v.is_int64()) return double(v.get_int64());
    if (v.is_uint64()) return double(v.get_uint64());
    bad(fmt::format("'{}' must be a number", field));
}

int64_t integer(const json::value& v, const char* field) {
    if (v.is_int64()) return v.get_int64();
    if (v.is_uint64() && v.get_uint64() <= uint64_t(std::numeric_limits<int64_t>::max()))
        return int64_t(v.get_uint64());
    if (v.is_double() && std::floor(v.get_double()) == v.get_double() && std::fabs(v.get_double()) < 9e15)
        return int64_t(v.get_double());
    bad(fmt::format("'{}' must be an integer", field));
}

int32_t int32_in(const json::value& v, const char* field, int64_t lo, int64_t hi) {
    const int64_t x = integer(v, field);
    if (x < lo || x > hi) bad(fmt::format("'{}' must be in {}..{}", field, lo, hi));
    return int32_t(x);
}

std::vector<int32_t> token_ids(const json::value& v, const char* field) {
    if (!v.is_array()) bad(fmt::format("'{}' must be an array of token ids", field));
    std::vector<int32_t> ids;
    for (const json::value& t : v.as_array())
        ids.push_back(int32_in(t, field, 0, std::numeric_limits<int32_t>::max()));
    return ids;
}

}  // namespace

namespace {

std::vector<int32_t> encode_prompt(const json::value& v, const Tokenizer& tokenizer) {
    std::vector<int32_t> ids = tokenizer.encode(std::string_view(v.get_string()), /*add_special=*/true);
    if (ids.empty()) bad("the prompt is empty");
    return ids;
}

std::vector<std::vector<int32_t>> parse_prompts(const json::object& body, const Tokenizer& tokenizer) {
    const json::value* prompt = body.if_contains("prompt");
    const json::value* prompt_ids = body.if_contains("prompt_token_ids");
    if (prompt && prompt_ids) bad("give 'prompt' or 'prompt_token_ids', not both");
    std::vector<std::vector<int32_t>> prompts;
    if (prompt_ids) {
        prompts.push_back(token_ids(*prompt_ids, "prompt_token_ids"));
    } else if (prompt && prompt->is_string()) {
        prompts.push_back(encode_prompt(*prompt, tokenizer));
    } else if (prompt && prompt->is_array() && !prompt->as_array().empty()) {
        const json::array& a = prompt->as_array();
        if (a.front().is_string()) {  // a batch of texts
            for (const json::value& p : a) {
                if (!p.is_string()) bad("'prompt' must not mix texts and token ids");
                prompts.push_back(encode_prompt(p, tokenizer));
            }
        } else if (a.front().is_array()) {  // a batch of token-id lists
            for (const json::value& p : a) prompts.push_back(token_ids(p, "prompt"));
        } else {
            prompts.push_back(token_ids(*prompt, "prompt"));  // OpenAI allows a prompt of token ids
        }
    } else {
        bad("'prompt' must be a string, a list of strings, or token ids");
    }
    if (prompts.size() > 1024) bad("'prompt' takes at most 1024 prompts");
    for (const auto& p : prompts)
        if (p.empty()) bad("the prompt is empty");
    return prompts;
}

}  // namespace

CompletionRequest parse_completion_request(const json::object& body, const Tokenizer& tokenizer, bool json_compact) {
    CompletionRequest r;
    r.prompts = parse_prompts(body, tokenizer);
    r.options = parse_generation_options(body, /*chat=*/false, {"prompt", "prompt_token_ids"}, &r.ignored_fields, json_compact);
    return r;
}

grammar::GrammarCache& compiled_grammars() {
    static grammar::GrammarCache cache;
    return cache;
}

std::shared_ptr<const grammar::Grammar> schema_grammar(const json::value& schema, const grammar::JsonSchemaOptions& options) {
    return compiled_grammars().get(std::string(options.compact ? "schema-compact:" : "schema:") + json::serialize(schema),
                                   [&] { return grammar::json_schema_grammar(schema, options); });
}

namespace {

// A request's GBNF grammar; a 400 that says where it is wrong.
std::shared_ptr<const grammar::Grammar> compile_gbnf(std::string_view source, const std::string& field) {
    try {
        return compiled_grammars().get("gbnf:" + std::string(source), [&] { return grammar::parse_gbnf(source); });
    } catch (const grammar::GrammarError& e) {
        bad(fmt::format("'{}': {}", field, e.what()));
    }
}

// A list of strings of which the output must be one.
std::shared_ptr<const grammar::Grammar> compile_choice(const json::value& v, const std::string& field) {
    std::vector<std::string> choices;
    if (v.is_array())
        for (const json::value& c : v.as_array()) {
            if (!c.is_string()) break;
            choices.emplace_back(c.get_string());
        }
    if (!v.is_array() || choices.empty() || choices.size() != v.as_array().size())
        bad(fmt::format("'{}' must be a non-empty array of strings", field));
    try {
        return compiled_grammars().get("choice:" + json::serialize(v), [&] { return grammar::choice_grammar(choices); });
    } catch (const grammar::GrammarError& e) {
        bad(fmt::format("'{}': {}", field, e.what()));
    }
}

// A regular expression the whole output must match.
std::shared_ptr<const grammar::Grammar> compile_regex(const json::value& v, const std::string& field) {
    if (!v.is_string()) bad(fmt::format("'{}' must be a regular expression (a string)", field));
    try {
        return compiled_grammars().get("regex:" + std::string(v.get_string()),
                                       [&] { return grammar::regex_grammar(v.get_string()); });
    } catch (const grammar::GrammarError& e) {
        bad(fmt::format("'{}': {}", field, e.what()));
    }
}

// A JSON Schema (an object, or a string holding one) the output must validate against.
std::shared_ptr<const grammar::Grammar> compile_schema(const json::value& v, const std::string& field,
                                                      const grammar::JsonSchemaOptions& options) {
    json::value schema = v;
    if (v.is_string()) {
        boost::system::error_code ec;
        schema = json::parse(v.get_string(), ec);
        if (ec) bad(fmt::format("'{}' is not valid JSON", field));
    }
    if (!schema.is_object() && !schema.is_bool()) bad(fmt::format("'{}' must be a JSON Schema (an object)", field));
    try {
        return schema_grammar(schema, options);
    } catch (const grammar::GrammarError& e) {
        bad(fmt::format("'{}': {}", field, e.what()));
    }
}

std::shared_ptr<const grammar::Grammar> json_object(const grammar::JsonSchemaOptions& options);

// OpenAI's response_format: text, json_object, or json_schema {name, schema, strict}.
std::shared_ptr<const grammar::Grammar> response_format(const json::value& v, const grammar::JsonSchemaOptions& options) {
    const json::object* o = v.if_object();
    const json::value* type = o ? o->if_contains("type") : nullptr;
    if (!type || !type->is_string()) bad("'response_format' must be an object with a 'type'");
    if (*type == "text") return nullptr;
    if (*type == "json_object") return json_object(options);
    if (*type == "json_schema") {
        const json::value* js = o->if_contains("json_schema");
        if (!js || !js->is_object() || !js->as_object().contains("schema"))
            bad("'response_format' json_schema needs 'json_schema': {'name', 'schema'}");
        return compile_schema(js->as_object().at("schema"), "response_format.json_schema.schema", options);
    }
    bad("'response_format' type must be text, json_object or json_schema");
}

// Any JSON object (compact: the schema {"type": "object"} without whitespace).
std::shared_ptr<const grammar::Grammar> json_object(const grammar::JsonSchemaOptions& options) {
    if (!options.compact) return compiled_grammars().get("json_object", [] { return grammar::json_object_grammar(); });
    return schema_grammar(json::object{{"type", "object"}}, options);
}

}  // namespace

grammar::JsonSchemaOptions json_options(const json::object& body, bool compact_by_default) {
    grammar::JsonSchemaOptions options{.compact = compact_by_default};
    const json::value* so = body.if_contains("structured_outputs");
    const json::value* d = so && so->is_object() ? so->as_object().if_contains("disable_any_whitespace") : nullptr;
    if (d && !d->is_null()) {
        if (!d->is_bool()) bad("'structured_outputs.disable_any_whitespace' must be true or false");
        options.compact = d->get_bool();
    }
    return options;
}

// structured_outputs as we take it: one of grammar, choice, regex, json, and
// disable_any_whitespace beside it or alone.
static bool structured_outputs_taken(const json::object& so) {
    size_t constraints = 0;
    for (const auto& [k, v] : so) {
        if (k == "grammar" || k == "choice" || k == "regex" || k == "json") ++constraints;
        else if (k != "disable_any_whitespace") return false;
    }
    return constraints == 1 || (constraints == 0 && so.size() == 1);
}

GenerationOptions parse_generation_options(const json::object& body, bool chat,
                                           std::initializer_list<std::string_view> skip,
                                           std::vector<std::string>* ignored, bool json_compact) {
    GenerationOptions o;
    const grammar::JsonSchemaOptions json_opts = json_options(body, json_compact);
    SamplingParams& sp = o.sampling;
    int32_t top_logprobs = -1;  // chat's form
    for (const auto& [key, v] : body) {
        if (v.is_null()) continue;  // null means "the default", as OpenAI clients send it
        const std::string k(key);
        if (std::find(skip.begin(), skip.end(), std::string_view(k)) != skip.end() || k == "model" ||
            k == "stream" || k == "stream_options")
            continue;
        if (k == "max_tokens" || k == "max_completion_tokens") {
            o.max_tokens = int32_in(v, key.data(), 1, std::numeric_limits<int32_t>::max());
        } else if (k == "temperature") {
            sp.temperature = float(number(v, "temperature"));
            if (!(sp.temperature >= 0.0f && sp.temperature <= 100.0f)) bad("'temperature' must be in [0, 100]");
        } else if (k == "top_p") {
            sp.top_p = float(number(v, "top_p"));
        } else if (k == "top_k") {
            sp.top_k = int32_in(v, "top_k", -1, std::numeric_limits<int32_t>::max());
        } else if (k == "min_p") {
            sp.min_p = float(number(v, "min_p"));
        } else if (k == "presence_penalty") {
            sp.presence_penalty = float(number(v, "presence_penalty"));
        } else if (k == "frequency_penalty") {
            sp.frequency_penalty = float(number(v, "frequency_penalty"));
        } else if (k == "repetition_penalty") {
            sp.repetition_penalty = float(number(v, "repetition_penalty"));
        } else if (k == "seed") {
            sp.seed = uint64_t(integer(v, "seed"));
            o.has_seed = true;
        } else if (k == "n") {
            o.n = int32_in(v, "n", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());  // range: the engine's (--max-num-seqs)
        } else if (k == "stop") {
            if (v.is_string()) {
                o.stop.emplace_back(v.get_string());
            } else if (v.is_array()) {
                for (const json::value& s : v.as_array()) {
                    if (!s.is_string()) bad("'stop' must be a string or an array of strings");
                    o.stop.emplace_back(s.get_string());
                }
            } else {
                bad("'stop' must be a string or an array of strings");
            }
            if (o.stop.size() > 16) bad("'stop' takes at most 16 strings");
        } else if (k == "stop_token_ids") {
            o.stop_token_ids = token_ids(v, "stop_token_ids");
        } else if (k == "logprobs") {
            // Completions take an integer; chat takes true/false (with top_logprobs).
            if (chat && !v.is_bool()) bad("'logprobs' must be true or false");
            o.logprobs = v.is_bool() ? (v.get_bool() ? 0 : -1) : int32_in(v, "logprobs", 0, 20);
        } else if (k == "top_logprobs" && chat) {
            top_logprobs = int32_in(v, "top_logprobs", 0, 20);
        } else if (k == "echo" && !chat) {
            if (!v.is_bool()) bad("'echo' must be true or false");
            o.echo = v.get_bool();
        } else if (k == "ignore_eos") {
            if (!v.is_bool()) bad("'ignore_eos' must be true or false");
            o.ignore_eos = v.get_bool();
        } else if (k == "min_tokens") {
            o.min_tokens = int32_in(v, "min_tokens", 0, std::numeric_limits<int32_t>::max());
        } else if (k == "priority") {
            o.priority = int32_in(v, "priority", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
        } else if (k == "user") {
            if (!v.is_string()) bad("'user' must be a string");
            o.client = std::string(v.get_string());
        } else if (k == "logit_bias") {
            if (!v.is_object()) bad("'logit_bias' must be an object of token id -> bias");
            for (const auto& [id, bias] : v.as_object()) {
                int32_t token = 0;
                const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), token);
                if (ec != std::errc{} || end != id.data() + id.size())
                    bad(fmt::format("'logit_bias' key '{}' is not a token id", std::string(id)));
                sp.logit_bias.emplace_back(token, float(number(bias, "logit_bias")));
            }
        } else if (k == "grammar" || k == "guided_grammar") {  // llama.cpp's and vLLM's GBNF
            if (!v.is_string()) bad(fmt::format("'{}' must be a GBNF grammar (a string)", k));
            o.grammar = compile_gbnf(v.get_string(), k);
        } else if (k == "guided_choice") {
            o.grammar = compile_choice(v, k);
        } else if (k == "guided_regex") {
            o.grammar = compile_regex(v, k);
        } else if (k == "guided_json" || k == "json_schema") {  // vLLM's, llama.cpp's
            o.grammar = compile_schema(v, k, json_opts);
        } else if (k == "structured_outputs" && v.is_object() && structured_outputs_taken(v.as_object())) {
            const json::object& so = v.as_object();
            if (so.size() == 1 && so.contains("disable_any_whitespace")) {
                // (read above, for whichever field gives the schema)
            } else if (so.contains("json")) {
                o.grammar = compile_schema(so.at("json"), "structured_outputs.json", json_opts);
            } else if (so.contains("choice")) {
                o.grammar = compile_choice(so.at("choice"), "structured_outputs.choice");
            } else if (so.contains("regex")) {
                o.grammar = compile_regex(so.at("regex"), "structured_outputs.regex");
            } else {
                if (!so.at("grammar").is_string()) bad("'structured_outputs.grammar' must be a GBNF grammar (a string)");
                o.grammar = compile_gbnf(so.at("grammar").get_string(), "structured_outputs.grammar");
            }
        } else if (k == "response_format") {
            o.grammar = response_format(v, json_opts);
        } else if (k == "tools" || k == "tool_choice" || k == "parallel_tool_calls") {
            bad(fmt::format("'{}' is for chat (/v1/chat/completions)", k));
        } else if (k == "suffix" || k == "best_of" || k == "structured_outputs" || k == "functions" ||
                   k == "function_call" || k == "audio" || k == "modalities" || k == "prediction") {
            bad(fmt::format("'{}' is not supported yet", k));
        } else if (ignored) {
            ignored->push_back(k);
        }
    }
    if (top_logprobs >= 0) {
        if (o.logprobs < 0) bad("'top_logprobs' needs 'logprobs': true");
        o.logprobs = top_logprobs;
    }
    return o;
}

void accumulate(std::vector<CompletionChoice>& choices, std::vector<TokenLogprob>& prompt_logprobs,
                const RequestOutput& out) {
    prompt_logprobs.insert(prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
    for (const SampleOutput& s : out.samples) {
        auto it = std::find_if(choices.begin(), choices.end(), [&](const CompletionChoice& c) { return c.index == s.index; });
        if (it == choices.end()) {
            choices.push_back({});
            choices.back().index = s.index;
            it = choices.end() - 1;
        }
        it->token_ids.insert(it->token_ids.end(), s.token_ids.begin(), s.token_ids.end());
        it->text += s.text;
        it->logprobs.insert(it->logprobs.end(), s.logprobs.begin(), s.logprobs.end());
        if (s.finish_reason) {
            it->finish_reason = *s.finish_reason;
            it->stop_string = s.stop_string;
            it->stop_token = s.stop_token;
        }
    }
    std::sort(choices.begin(), choices.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
}

json::object completion_logprobs_json(const Tokenizer& tokenizer, const CompletionChoice& choice,
                                      const std::vector<int32_t>* echo_prompt,
                                      const std::vector<TokenLogprob>& prompt_logprobs) {
    json::array tokens, token_logprobs, top_logprobs, text_offset;
    size_t offset = 0;
    // Each token's text is what it adds to the decoded sequence, and so is each
    // candidate's in top_logprobs (the chosen token's key equals its entry in
    // tokens); a candidate that would leave a character incomplete is keyed by
    // its text alone.
    auto add = [&](IncrementalDetokenizer& detok, int32_t id, const TokenLogprob* lp) {
        json::object top;
        if (lp)
            for (const auto& [t, l] : lp->top) {
                std::string key = detok.peek(t);
                if (key.empty()) key = tokenizer.decode(std::span<const int32_t>(&t, 1));
                top[key] = l;
            }
        const std::string piece = detok.push(id);
        tokens.emplace_back(piece);
        text_offset.emplace_back(offset);
        offset += piece.size();
        if (!lp) {
            token_logprobs.emplace_back(nullptr);
            top_logprobs.emplace_back(nullptr);
            return;
        }
        token_logprobs.emplace_back(lp->logprob);
        top_logprobs.emplace_back(std::move(top));
    };
    std::vector<int32_t> context;
    if (echo_prompt) {
        IncrementalDetokenizer detok(tokenizer);
        for (size_t i = 0; i < echo_prompt->size(); ++i)
            add(detok, (*echo_prompt)[i], i == 0 || i - 1 >= prompt_logprobs.size() ? nullptr : &prompt_logprobs[i - 1]);
        context = *echo_prompt;
    }
    IncrementalDetokenizer detok(tokenizer, context);
    for (size_t i = 0; i < choice.logprobs.size() && i < choice.token_ids.size(); ++i)
        add(detok, choice.token_ids[i], &choice.logprobs[i]);
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
            {"text_offset", text_offset}};
}

}  // namespace minfer
