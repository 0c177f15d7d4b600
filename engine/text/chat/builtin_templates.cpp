// The built-in chat templates: the real Jinja2 templates of these model
// families, for models whose GGUF carries none (and for --template NAME).
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/text/chat/chat_template.h"

namespace minfer {

namespace {

// ChatML (Qwen, Hermes, SmolLM, ...): llama.cpp's default when a model has no template.
constexpr std::string_view kChatML =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Llama 2 chat (meta-llama/Llama-2-7b-chat-hf): [INST] turns, the system prompt
// in <<SYS>> inside the first one, BOS before and EOS after every exchange.
constexpr std::string_view kLlama2 =
    "{% if messages[0]['role'] == 'system' %}"
    "{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}";

// Llama 3 instruct (meta-llama/Meta-Llama-3-8B-Instruct).
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}"
    "{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
    "'<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

// Gemma instruct: user/model turns; Gemma has no system role, so a system
// message is folded into the first user turn (as Gemma 3's template does).
constexpr std::string_view kGemma =
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set first_user_prefix = messages[0]['content'] | trim + '\\n\\n' %}{% set loop_messages = messages[1:] %}"
    "{% else %}{% set first_user_prefix = '' %}{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') + message['content'] | trim + "
    "'<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";

// Phi-3 / Phi-3.5 mini instruct.
constexpr std::string_view kPhi3 =
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and message['content'] %}{{ '<|system|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kBuiltins = {{
    {"chatml", kChatML},
    {"llama2", kLlama2},
    {"llama3", kLlama3},
    {"gemma", kGemma},
    {"phi3", kPhi3},
}};

}  // namespace

std::optional<std::string_view> builtin_template_source(std::string_view name) {
    for (const auto& [n, source] : kBuiltins)
        if (n == name) return source;
    return std::nullopt;
}

std::vector<std::string> builtin_template_names() {
    std::vector<std::string> names;
    for (const auto& [n, source] : kBuiltins) names.emplace_back(n);
    return names;
}

}  // namespace minfer
