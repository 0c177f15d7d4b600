#include "engine/text/chat_prompt.h"

namespace minfer {

std::vector<int32_t> encode_rendered_chat(const Tokenizer& tok, const std::string& text) {
    const bool wrote_bos = tok.bos_id() >= 0 && text.starts_with(tok.piece(tok.bos_id()));
    return tok.encode(text, /*add_special=*/!wrote_bos, /*parse_special=*/true);
}

ChatPrompt encode_chat(const ChatTemplate& tmpl, const Tokenizer& tok, const boost::json::array& messages,
                       bool add_generation_prompt, const boost::json::value& tools) {
    ChatPrompt p;
    p.text = tmpl.render(messages, add_generation_prompt, tools);
    p.ids = encode_rendered_chat(tok, p.text);
    return p;
}

}  // namespace minfer
