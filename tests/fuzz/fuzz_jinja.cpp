// libFuzzer target for the Jinja interpreter behind chat templates
// (engine/text/chat/jinja_*.cpp; see README.md in this folder).
//
// Any input is a template. Parsing must either succeed or throw a
// TemplateError; rendering it for a small tool-calling conversation must
// either return text or throw a TemplateError. Anything else escapes and
// aborts; AddressSanitizer, UBSan and LeakSanitizer catch memory errors and
// leaks (a namespace that holds itself, say), and libFuzzer's -timeout a
// template that runs too long despite the render limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/text/chat/jinja_interpreter.h"
#include "engine/text/chat/jinja_parser.h"

using namespace minfer::jinja;

namespace {

Value dict(std::vector<std::pair<std::string, Value>> entries) {
    Dict d;
    for (auto& [k, v] : entries) d.set(Value::string(k), std::move(v));
    return Value::dict(std::move(d));
}

std::vector<std::pair<std::string, Value>> conversation() {
    const Value call = dict({{"id", Value::string("call12345")},
                             {"type", Value::string("function")},
                             {"function", dict({{"name", Value::string("get_weather")},
                                                {"arguments", dict({{"city", Value::string("Paris")}})}})}});
    const Value messages = Value::list({
        dict({{"role", Value::string("system")}, {"content", Value::string("Be brief. ")}}),
        dict({{"role", Value::string("user")}, {"content", Value::string("Weather in Paris? é🙂")}}),
        dict({{"role", Value::string("assistant")}, {"content", Value::none()}, {"tool_calls", Value::list({call})}}),
        dict({{"role", Value::string("tool")}, {"tool_call_id", Value::string("call12345")}, {"content", Value::string("22C")}}),
        dict({{"role", Value::string("assistant")}, {"content", Value::string("It is 22C.")}}),
    });
    const Value tools = Value::list({dict(
        {{"type", Value::string("function")},
         {"function", dict({{"name", Value::string("get_weather")},
                            {"description", Value::string("Weather of a city")},
                            {"parameters", dict({{"type", Value::string("object")},
                                                 {"properties", dict({{"city", dict({{"type", Value::string("string")}})}})},
                                                 {"required", Value::list({Value::string("city")})}})}})}})});
    return {{"messages", messages},
            {"tools", tools},
            {"add_generation_prompt", Value::boolean(true)},
            {"bos_token", Value::string("<s>")},
            {"eos_token", Value::string("</s>")}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view source(reinterpret_cast<const char*>(data), size);
    std::shared_ptr<const Program> program;
    try {
        program = parse_template(source);
    } catch (const TemplateError&) {
        return 0;
    }
    // Small limits: an input should finish in milliseconds even under the sanitizers.
    RenderLimits limits;
    limits.max_steps = 200'000;
    limits.max_string_bytes = 1 << 20;
    static const std::vector<std::pair<std::string, Value>> variables = conversation();
    try {
        render(*program, variables, limits);
    } catch (const TemplateError&) {
    }
    return 0;
}
