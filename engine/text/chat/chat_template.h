// Chat templates: a model's list of messages → the prompt text it was trained
// on, by the model's own Jinja2 template (GGUF tokenizer.chat_template), run by
// our interpreter (engine/text/chat/jinja_*.h) exactly as Hugging Face transformers
// runs it: trim_blocks, lstrip_blocks, loop controls, a tojson that keeps
// non-ASCII, raise_exception and strftime_now. engine/text/chat/README.md says
// which subset of Jinja2 is supported and how it is tested against jinja2.
#pragma once

#include <boost/json.hpp>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class GGUFFile;
class Tokenizer;

namespace jinja {
struct Program;
}

struct ChatTemplateError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class ChatTemplate {
public:
    // Parses now: a syntax error or an unsupported construct (unknown tag,
    // filter or test) throws ChatTemplateError naming it and its line.
    static ChatTemplate from_source(std::string source, std::string bos_token = "", std::string eos_token = "");
    // chatml, llama2, llama3, gemma, phi3; an unknown name throws, listing the known ones.
    static ChatTemplate builtin(std::string_view name, std::string bos_token, std::string eos_token);
    static std::vector<std::string> builtin_names();
    // A template FILE, or a built-in NAME (a readable file wins).
    static ChatTemplate from_file_or_name(const std::string& file_or_name, std::string bos_token, std::string eos_token);

    // Renders the prompt. The template sees `messages` (each {role, content,
    // ...: tool_calls, tool_call_id, ...}), `tools` (None when null, as
    // transformers passes it), `add_generation_prompt`, `bos_token`,
    // `eos_token`, and every key of `extra` (date_string, documents, ...),
    // which may shadow the others. Throws ChatTemplateError: for a template
    // that rejects the conversation (raise_exception), the template's message.
    std::string render(const boost::json::array& messages, bool add_generation_prompt,
                       const boost::json::value& tools = nullptr, const boost::json::object& extra = {}) const;

    const std::string& source() const { return source_; }
    const std::string& bos_token() const { return bos_token_; }
    const std::string& eos_token() const { return eos_token_; }

private:
    ChatTemplate(std::string source, std::string bos, std::string eos, std::shared_ptr<const jinja::Program> program);

    std::string source_;
    std::string bos_token_;
    std::string eos_token_;
    std::shared_ptr<const jinja::Program> program_;
};

// The template a model should use: `override_file_or_name` if non-empty, else
// the GGUF's tokenizer.chat_template, else built-in chatml (llama.cpp's
// default). The bos/eos token strings are the tokenizer's pieces.
ChatTemplate chat_template_for_model(const GGUFFile& file, const Tokenizer& tok, const std::string& override_file_or_name);
// The same with the token strings given (for a file whose tokenizer we cannot
// build: special_token_pieces() reads them from the metadata).
ChatTemplate chat_template_for_model(const GGUFFile& file, std::string bos_token, std::string eos_token,
                                     const std::string& override_file_or_name);

// BOS and EOS piece strings straight from tokenizer.ggml.tokens and the
// bos/eos ids in the metadata ("" where missing).
std::pair<std::string, std::string> special_token_pieces(const GGUFFile& file);

// The Jinja source of a built-in template, or nullopt (builtin_templates.cpp).
std::optional<std::string_view> builtin_template_source(std::string_view name);
std::vector<std::string> builtin_template_names();

}  // namespace minfer
