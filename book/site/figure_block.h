// ```figure blocks: `key: value` lines naming an interactive figure
// (book/figures/ID.js). id and title are required; caption is optional; every
// other key is an option passed to the figure's mount(element, options).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace minfer::book {

struct FigureSpec {
    std::string id, title, caption;
    std::map<std::string, std::string> options;

    // The options as a JSON object; values that read as numbers or booleans
    // become JSON numbers or booleans, the rest strings.
    std::string options_json() const;
};

// Throws BookError for a line without "key: value", a repeated key, a missing
// id or title, or an id that is not a slug.
FigureSpec parse_figure_block(std::string_view body);

// The live figure on an HTML page (mounted by site.js; the noscript note and
// the caption stay readable without JavaScript).
std::string figure_html(const FigureSpec& f);

// The placeholder in the Markdown twin: the title, the caption and a link to /figures/ID.
std::string figure_markdown(const FigureSpec& f);

}  // namespace minfer::book
