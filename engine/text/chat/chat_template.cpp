#include "engine/text/chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/text/chat/jinja_interpreter.h"
#include "engine/text/chat/jinja_parser.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

namespace minfer {

namespace {

ChatTemplateError to_chat_error(const jinja::TemplateError& e, const char* stage) {
    if (e.raised_by_template) return ChatTemplateError(std::string("chat template: ") + e.what());
    std::string where = e.line > 0 ? " at line " + std::to_string(e.line) : "";
    return ChatTemplateError(std::string("chat template ") + stage + where + ": " + e.what());
}

jinja::Value from_json(const boost::json::value& v) {
    switch (v.kind()) {
        case boost::json::kind::null: return jinja::Value::none();
        case boost::json::kind::bool_: return jinja::Value::boolean(v.get_bool());
        case boost::json::kind::int64: return jinja::Value::integer(v.get_int64());
        case boost::json::kind::uint64: {
            const uint64_t u = v.get_uint64();
            return u <= static_cast<uint64_t>(INT64_MAX) ? jinja::Value::integer(static_cast<int64_t>(u))
                                                          : jinja::Value::number(static_cast<double>(u));
        }
        case boost::json::kind::double_: return jinja::Value::number(v.get_double());
        case boost::json::kind::string: return jinja::Value::string(std::string(v.get_string()));
        case boost::json::kind::array: {
            std::vector<jinja::Value> items;
            for (const auto& x : v.get_array()) items.push_back(from_json(x));
            return jinja::Value::list(std::move(items));
        }
        case boost::json::kind::object: {
            jinja::Dict d;
            for (const auto& [key, x] : v.get_object()) d.set(jinja::Value::string(std::string(key)), from_json(x));
            return jinja::Value::dict(std::move(d));
        }
    }
    return jinja::Value::none();
}

std::string known_builtins() {
    std::string names;
    for (const auto& n : builtin_template_names()) names += (names.empty() ? "" : ", ") + n;
    return names;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bos, std::string eos,
                           std::shared_ptr<const jinja::Program> program)
    : source_(std::move(source)), bos_token_(std::move(bos)), eos_token_(std::move(eos)), program_(std::move(program)) {}

ChatTemplate ChatTemplate::from_source(std::string source, std::string bos_token, std::string eos_token) {
    std::shared_ptr<const jinja::Program> program;
    try {
        program = jinja::parse_template(source);
    } catch (const jinja::TemplateError& e) {
        throw to_chat_error(e, "syntax error");
    }
    return ChatTemplate(std::move(source), std::move(bos_token), std::move(eos_token), std::move(program));
}

ChatTemplate ChatTemplate::builtin(std::string_view name, std::string bos_token, std::string eos_token) {
    const auto source = builtin_template_source(name);
    if (!source)
        throw ChatTemplateError("no built-in chat template named '" + std::string(name) + "' (built-ins: " +
                                known_builtins() + ")");
    return from_source(std::string(*source), std::move(bos_token), std::move(eos_token));
}

std::vector<std::string> ChatTemplate::builtin_names() { return builtin_template_names(); }

ChatTemplate ChatTemplate::from_file_or_name(const std::string& file_or_name, std::string bos_token,
                                             std::string eos_token) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(file_or_name, ec)) {
        std::ifstream f(file_or_name, std::ios::binary);
        if (f) {
            std::stringstream ss;
            ss << f.rdbuf();
            try {
                return from_source(ss.str(), std::move(bos_token), std::move(eos_token));
            } catch (const ChatTemplateError& e) {
                throw ChatTemplateError(file_or_name + ": " + e.what());
            }
        }
    }
    if (builtin_template_source(file_or_name)) return builtin(file_or_name, std::move(bos_token), std::move(eos_token));
    throw ChatTemplateError("'" + file_or_name + "' is neither a readable template file nor a built-in template (" +
                            known_builtins() + ")");
}

std::string ChatTemplate::render(const boost::json::array& messages, bool add_generation_prompt,
                                 const boost::json::value& tools, const boost::json::object& extra) const {
    // What transformers' apply_chat_template passes (tools is None when absent).
    std::vector<std::pair<std::string, jinja::Value>> vars = {
        {"messages", from_json(messages)},
        {"tools", from_json(tools)},
        {"add_generation_prompt", jinja::Value::boolean(add_generation_prompt)},
        {"bos_token", jinja::Value::string(bos_token_)},
        {"eos_token", jinja::Value::string(eos_token_)},
    };
    for (const auto& [key, value] : extra) vars.emplace_back(std::string(key), from_json(value));
    try {
        return jinja::render(*program_, vars);
    } catch (const jinja::TemplateError& e) {
        throw to_chat_error(e, "error");
    }
}

std::pair<std::string, std::string> special_token_pieces(const GGUFFile& file) {
    std::pair<std::string, std::string> pieces;
    const GGUFValue* tokens_value = file.find("tokenizer.ggml.tokens");
    if (!tokens_value || !std::holds_alternative<GGUFArray>(tokens_value->v)) return pieces;
    const std::vector<std::string>& tokens = std::get<GGUFArray>(tokens_value->v).strings;
    auto piece = [&](const char* key) -> std::string {
        if (!file.has(key)) return "";
        try {
            const int64_t id = file.get_int(key);
            return id >= 0 && static_cast<size_t>(id) < tokens.size() ? tokens[static_cast<size_t>(id)] : "";
        } catch (const std::exception&) {
            return "";
        }
    };
    pieces.first = piece("tokenizer.ggml.bos_token_id");
    pieces.second = piece("tokenizer.ggml.eos_token_id");
    return pieces;
}

ChatTemplate chat_template_for_model(const GGUFFile& file, std::string bos_token, std::string eos_token,
                                     const std::string& override_file_or_name) {
    if (!override_file_or_name.empty())
        return ChatTemplate::from_file_or_name(override_file_or_name, std::move(bos_token), std::move(eos_token));
    if (file.has("tokenizer.chat_template")) {
        try {
            return ChatTemplate::from_source(file.get_string("tokenizer.chat_template"), std::move(bos_token),
                                             std::move(eos_token));
        } catch (const ChatTemplateError& e) {
            throw ChatTemplateError(file.path() + ": tokenizer.chat_template: " + e.what());
        }
    }
    return ChatTemplate::builtin("chatml", std::move(bos_token), std::move(eos_token));
}

ChatTemplate chat_template_for_model(const GGUFFile& file, const Tokenizer& tok, const std::string& override_file_or_name) {
    const std::string bos = tok.bos_id() >= 0 && tok.bos_id() < tok.vocab_size() ? tok.piece(tok.bos_id()) : "";
    const std::string eos = tok.eos_id() >= 0 && tok.eos_id() < tok.vocab_size() ? tok.piece(tok.eos_id()) : "";
    return chat_template_for_model(file, bos, eos, override_file_or_name);
}

}  // namespace minfer
