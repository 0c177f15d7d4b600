#include "server/tool_calls.h"

#include <spdlog/spdlog.h>

#include "engine/core/llm_engine.h"
#include "engine/grammar/json_schema.h"
#include "server/completion_json.h"

namespace minfer {

namespace json = boost::json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(what); }

const json::object& function_of(const json::value& tool) { return tool.as_object().at("function").as_object(); }

std::string name_of(const json::value& tool) { return std::string(function_of(tool).at("name").get_string()); }

json::value parameters_of(const json::value& tool) {
    const json::value* p = function_of(tool).if_contains("parameters");
    return p && !p->is_null() ? *p : json::value(json::object{{"type", "object"}});
}

// "#/..." references of a schema moved to `prefix` inside a larger one.
void move_refs(json::value& v, const std::string& prefix) {
    if (json::object* o = v.if_object()) {
        for (auto& [key, item] : *o) {
            if (key == "$ref" && item.is_string() && item.get_string().starts_with("#"))
                item = "#" + prefix + std::string(item.get_string()).substr(1);
            else
                move_refs(item, prefix);
        }
    } else if (json::array* a = v.if_array()) {
        for (json::value& item : *a) move_refs(item, prefix);
    }
}

// The schema of one call object: {"name": NAME, ARGS: parameters}, in that order.
json::value call_schema(const std::string& name, json::value parameters, const char* arguments_key) {
    return json::object{{"type", "object"},
                        {"properties", {{"name", {{"const", name}}}, {arguments_key, std::move(parameters)}}},
                        {"required", json::array{"name", arguments_key}},
                        {"additionalProperties", false}};
}

// The GBNF of the calls: rule `call` is one call object; `root` wraps them as the format writes them.
std::string calls_gbnf(ToolCallFormat format, bool parallel) {
    switch (format) {
        case ToolCallFormat::Hermes:
            return std::string("one ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\nroot ::= one") +
                   (parallel ? " ( \"\\n\" one )*\n" : "\n");
        case ToolCallFormat::Llama3Json:
            return parallel ? "root ::= call ( \";\" \" \"? call )*\n" : "root ::= call\n";
        case ToolCallFormat::Mistral:
            return parallel ? "root ::= \"[\" call ( \",\" \" \"? call )* \"]\"\n" : "root ::= \"[\" call \"]\"\n";
        case ToolCallFormat::Json:
            return parallel ? "root ::= call | \"[\" call ( \",\" \" \"? call )* \"]\"\n" : "root ::= call\n";
    }
    return "root ::= call\n";
}

std::vector<grammar::GrammarTrigger> triggers_of(ToolCallFormat format) {
    switch (format) {
        case ToolCallFormat::Hermes: return {{"<tool_call>", false}};
        case ToolCallFormat::Llama3Json: return {{"{", true}};
        case ToolCallFormat::Mistral: return {{"[", true}};
        case ToolCallFormat::Json: return {{"{", true}, {"[", true}};
    }
    return {};
}

}  // namespace

ToolRequest parse_tool_request(const json::object& body) {
    ToolRequest r;
    if (const json::value* tools = body.if_contains("tools"); tools && !tools->is_null()) {
        if (!tools->is_array()) bad("'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
        for (size_t i = 0; i < tools->as_array().size(); ++i) {
            const json::value& t = tools->as_array()[i];
            const std::string at = "'tools[" + std::to_string(i) + "]'";
            const json::object* o = t.if_object();
            const json::value* type = o ? o->if_contains("type") : nullptr;
            const json::value* fn = o ? o->if_contains("function") : nullptr;
            if (!type || *type != "function" || !fn || !fn->is_object())
                bad(at + " must be {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}");
            const json::value* name = fn->as_object().if_contains("name");
            if (!name || !name->is_string() || name->get_string().empty() || name->get_string().size() > 64 ||
                std::any_of(name->get_string().begin(), name->get_string().end(),
                            [](char c) { return !std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-'; }))
                bad(at + ": 'function.name' must be 1 to 64 letters, digits, '_' or '-'");
            const json::value* params = fn->as_object().if_contains("parameters");
            if (params && !params->is_null() && !params->is_object())
                bad(at + ": 'function.parameters' must be a JSON Schema object");
            for (const json::value& other : r.tools)
                if (name_of(other) == name->get_string()) bad(at + ": two tools are named '" + name_of(t) + "'");
            r.tools.push_back(t);
        }
    }
    r.choice = r.tools.empty() ? ToolRequest::Choice::None : ToolRequest::Choice::Auto;
    if (const json::value* c = body.if_contains("tool_choice"); c && !c->is_null()) {
        const json::object* o = c->if_object();
        const json::value* fn = o ? o->if_contains("function") : nullptr;
        const json::value* name = fn && fn->is_object() ? fn->as_object().if_contains("name") : nullptr;
        if (*c == "none") r.choice = ToolRequest::Choice::None;
        else if (*c == "auto") r.choice = ToolRequest::Choice::Auto;
        else if (*c == "required") r.choice = ToolRequest::Choice::Required;
        else if (name && name->is_string()) {
            r.choice = ToolRequest::Choice::Named;
            r.named = name->get_string();
        } else {
            bad("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}");
        }
        if (r.tools.empty() && r.choice != ToolRequest::Choice::None) bad("'tool_choice' needs 'tools'");
        if (r.choice == ToolRequest::Choice::Named &&
            std::none_of(r.tools.begin(), r.tools.end(), [&](const json::value& t) { return name_of(t) == r.named; }))
            bad("'tool_choice' names '" + r.named + "', which is not in 'tools'");
    }
    if (const json::value* p = body.if_contains("parallel_tool_calls"); p && !p->is_null()) {
        if (!p->is_bool()) bad("'parallel_tool_calls' must be true or false");
        r.parallel = p->get_bool();
    }
    return r;
}

void constrain_tool_calls(const ToolRequest& tools, ToolCallFormat format, GenerationOptions& options,
                          const grammar::JsonSchemaOptions& json) {
    if (!tools.parses()) return;
    const bool strict = tools.choice != ToolRequest::Choice::Auto;
    const char* arguments_key = format == ToolCallFormat::Llama3Json ? "parameters" : "arguments";
    json::array calls;
    for (size_t i = 0; i < tools.tools.size(); ++i) {
        const json::value& t = tools.tools[i];
        if (tools.choice == ToolRequest::Choice::Named && name_of(t) != tools.named) continue;
        json::value parameters = parameters_of(t);
        try {
            schema_grammar(parameters, json);  // can it be enforced? (cached: the next request asks again)
        } catch (const grammar::GrammarError& e) {
            const std::string where = "'tools[" + std::to_string(i) + "].function.parameters': " + e.what();
            if (strict) bad(where);
            spdlog::warn("{}; its arguments are held to any JSON object", where);
            parameters = json::object{{"type", "object"}};
        }
        move_refs(parameters, "/anyOf/" + std::to_string(calls.size()) + "/properties/" + arguments_key);
        calls.push_back(call_schema(name_of(t), std::move(parameters), arguments_key));
    }
    const json::value schema = json::object{{"anyOf", std::move(calls)}};
    try {
        const std::string wrapper = calls_gbnf(format, tools.parallel);
        options.grammar = compiled_grammars().get(
            std::string(json.compact ? "tools-compact:" : "tools:") + wrapper + "\n" + json::serialize(schema),
            [&] { return grammar::json_schema_grammar(schema, wrapper, "call", json); });
    } catch (const grammar::GrammarError& e) {
        bad(std::string("'tools': the calls' grammar fails: ") + e.what());
    }
    if (!strict) options.grammar_triggers = triggers_of(format);
}

json::array messages_for_template(json::array messages, const ToolRequest& tools, bool template_knows_tools) {
    for (json::value& m : messages) {
        json::object& msg = m.as_object();
        if (json::value* content = msg.if_contains("content"); content && content->is_null()) *content = "";
        json::value* calls = msg.if_contains("tool_calls");
        if (!calls || calls->is_null()) continue;
        if (!calls->is_array()) bad("a message's 'tool_calls' must be an array");
        json::array written;
        for (json::value& c : calls->as_array()) {
            json::object* call = c.if_object();
            json::value* function = call ? call->if_contains("function") : nullptr;
            json::object* fn = function ? function->if_object() : nullptr;
            const json::value* name = fn ? fn->if_contains("name") : nullptr;
            json::value* args = fn ? fn->if_contains("arguments") : nullptr;
            if (!name || !name->is_string()) bad("each of a message's 'tool_calls' needs 'function': {'name', 'arguments'}");
            if (args && args->is_string()) {
                boost::system::error_code ec;
                json::value parsed = json::parse(args->get_string(), ec);
                if (ec) bad("a tool call's 'arguments' must be a JSON text, got '" + std::string(args->get_string()) + "'");
                *args = std::move(parsed);
            }
            written.push_back(json::object{{"name", *name}, {"arguments", args ? *args : json::object{}}});
        }
        json::value& content = msg["content"];
        if (!content.is_string()) content = "";
        if (!template_knows_tools && content.get_string().empty())
            content = json::serialize(written.size() == 1 ? written[0] : json::value(written));
    }
    if (template_knows_tools || !tools.parses()) return messages;
    // A template without tools: say what they are and how to call one, in the system message.
    std::string text =
        "You can call functions. To call one, answer with nothing but a JSON object "
        "{\"name\": <the function's name>, \"arguments\": <an object of its arguments>}. The functions:";
    for (const json::value& t : tools.tools) text += "\n" + json::serialize(function_of(t));
    json::object* first = messages.empty() ? nullptr : messages[0].if_object();
    if (first && first->contains("role") && first->at("role") == "system" && (*first)["content"].is_string())
        (*first)["content"] = std::string(first->at("content").get_string()) + "\n\n" + text;
    else
        messages.insert(messages.begin(), json::object{{"role", "system"}, {"content", text}});
    return messages;
}

}  // namespace minfer
