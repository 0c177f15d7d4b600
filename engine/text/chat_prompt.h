// From a conversation to prompt ids: the chat template renders the messages,
// and the text is tokenized with the special tokens it wrote matched as
// tokens (not spelled out), and without a second BOS when the template
// already began with one. `minfer run --chat` and the server's
// /v1/chat/completions both go through here.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/chat/chat_template.h"
#include "engine/text/tokenizer.h"

namespace minfer {

struct ChatPrompt {
    std::string text;             // the rendered template
    std::vector<int32_t> ids;
};

ChatPrompt encode_chat(const ChatTemplate& tmpl, const Tokenizer& tok, const boost::json::array& messages,
                       bool add_generation_prompt = true, const boost::json::value& tools = nullptr);

// The ids of a rendered prompt: specials matched; the tokenizer's BOS added
// only if it adds one and the text does not already start with it.
std::vector<int32_t> encode_rendered_chat(const Tokenizer& tok, const std::string& text);

}  // namespace minfer
