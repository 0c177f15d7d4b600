// The book's MCP tools: list_chapters, get_chapter, get_section, search (the
// prose) and search_glossary, with
// their input and output schemas. The transport (book/site/mcp.h) parses
// JSON-RPC; this file knows only the tools.
#pragma once

#include <boost/json.hpp>
#include <stdexcept>
#include <string_view>

#include "book/site/book_index.h"

namespace minfer::book {

// A call the protocol refuses (JSON-RPC -32602): an unknown tool, or
// arguments that do not fit its inputSchema.
struct InvalidParams : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class BookTools {
public:
    explicit BookTools(const Book& book);  // `book` must outlive the tools

    // The tools/list entries: name, title, description, inputSchema, outputSchema, annotations.
    const boost::json::array& definitions() const { return definitions_; }

    // A CallToolResult: {"content":[{"type":"text","text":JSON}],
    // "structuredContent":..., "isError":false}. A failure of the tool itself
    // (no chapter with that slug) is a result with isError true, so the model
    // reads it; throws InvalidParams for what the protocol refuses.
    boost::json::object call(std::string_view name, const boost::json::object& arguments) const;

private:
    boost::json::object list_chapters() const;
    boost::json::object get_chapter(const std::string& slug) const;
    boost::json::object search_glossary(const std::string& query) const;
    boost::json::object get_section(const std::string& slug) const;
    boost::json::object search(const std::string& query) const;

    const Book& book_;
    boost::json::array definitions_;
};

}  // namespace minfer::book
