// minfer chat-template (MODEL | --template FILE_OR_NAME [--bos-token S --eos-token S])
//                     --messages FILE.json [--add-generation-prompt]
//
// Renders a chat template for a conversation and prints the prompt exactly
// (no newline added). FILE.json is a list of messages, or an object with
// "messages" and optionally "tools"; its other keys become template variables
// (date_string, documents, ...). With MODEL, the template is the model's own
// (tokenizer.chat_template, else chatml) and BOS/EOS are its token pieces.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include <boost/json.hpp>
#include <cxxopts.hpp>

#include "engine/text/chat/chat_template.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

namespace minfer::cli {

namespace {

namespace json = boost::json;

struct Conversation {
    json::array messages;
    json::value tools = nullptr;
    json::object extra;
};

std::string read_text(const std::string& path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read messages file '" + path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

Conversation read_conversation(const std::string& path) {
    json::parse_options options;
    options.max_depth = 256;
    std::error_code ec;
    json::value doc = json::parse(read_text(path), ec, {}, options);
    if (ec) throw std::runtime_error(path + ": invalid JSON: " + ec.message());
    Conversation c;
    if (doc.is_array()) {
        c.messages = std::move(doc.get_array());
        return c;
    }
    if (!doc.is_object() || !doc.get_object().contains("messages") || !doc.get_object().at("messages").is_array())
        throw std::runtime_error(path + ": expected a list of messages, or an object with a \"messages\" list");
    for (auto& [key, value] : doc.get_object()) {
        if (key == "messages") c.messages = std::move(value.get_array());
        else if (key == "tools") c.tools = std::move(value);
        else c.extra.emplace(key, std::move(value));
    }
    return c;
}

}  // namespace

int cmd_chat_template(int argc, char** argv) {
    cxxopts::Options opts = command_options(
        "chat-template",
        "Render a chat template for a list of messages and print the prompt exactly (no newline added).\nThe "
        "template is a MODEL's own (its tokenizer.chat_template, else chatml), or --template: a Jinja file or a "
        "built-in name.",
        "[MODEL] [options]");
    // clang-format off
    opts.add_options()
        ("model", "GGUF file whose template and BOS/EOS tokens to use", cxxopts::value<std::string>())
        ("template", "a template FILE, or a built-in NAME (see --list); with MODEL it replaces the model's",
         cxxopts::value<std::string>())
        ("bos-token", "the BOS token string (default: the model's, else empty)", cxxopts::value<std::string>())
        ("eos-token", "the EOS token string (default: the model's, else empty)", cxxopts::value<std::string>())
        ("messages", "JSON file ('-': stdin): a list of {role, content, ...}, or an object with \"messages\", "
                     "\"tools\" and more template variables", cxxopts::value<std::string>())
        ("add-generation-prompt", "end with the header of the assistant's turn")
        ("print-source", "print the template's Jinja source instead of rendering")
        ("list", "list the built-in templates");
    // clang-format on
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"});
    if (args.count("list")) {
        for (const auto& name : ChatTemplate::builtin_names()) std::printf("%s\n", name.c_str());
        return 0;
    }
    if (!args.count("model") && !args.count("template")) throw UsageError("give a MODEL or --template FILE_OR_NAME");
    if (!args.count("print-source") && !args.count("messages")) throw UsageError("--messages FILE.json is required");

    const std::string override_template = args.count("template") ? args["template"].as<std::string>() : "";
    std::string bos, eos;
    std::optional<ChatTemplate> tmpl;
    if (args.count("model")) {
        const GGUFFile file = GGUFFile::open(args["model"].as<std::string>());
        std::unique_ptr<Tokenizer> tokenizer;
        try {
            tokenizer = Tokenizer::from_gguf(file);
        } catch (const std::exception&) {
            // A tokenizer we cannot build (yet): its BOS/EOS pieces are still in the metadata.
        }
        if (tokenizer && !args.count("bos-token") && !args.count("eos-token")) {
            tmpl = chat_template_for_model(file, *tokenizer, override_template);
        } else {
            std::tie(bos, eos) = special_token_pieces(file);
            if (args.count("bos-token")) bos = args["bos-token"].as<std::string>();
            if (args.count("eos-token")) eos = args["eos-token"].as<std::string>();
            tmpl = chat_template_for_model(file, bos, eos, override_template);
        }
    } else {
        if (args.count("bos-token")) bos = args["bos-token"].as<std::string>();
        if (args.count("eos-token")) eos = args["eos-token"].as<std::string>();
        tmpl = ChatTemplate::from_file_or_name(override_template, bos, eos);
    }

    if (args.count("print-source")) {
        std::fwrite(tmpl->source().data(), 1, tmpl->source().size(), stdout);
        return 0;
    }
    const Conversation conv = read_conversation(args["messages"].as<std::string>());
    const std::string prompt = tmpl->render(conv.messages, args.count("add-generation-prompt") > 0, conv.tools, conv.extra);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    return 0;
}

}  // namespace minfer::cli
