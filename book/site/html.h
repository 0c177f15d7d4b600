// Small text helpers for writing HTML and filling the theme's layout template.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace minfer::book {

// Escapes &, <, >, " and ' so text is safe inside elements and quoted attributes.
std::string html_escape(std::string_view text);

// Replaces every {{name}} in `tmpl` with vars[name]. A placeholder with no value
// is an error (a typo in the layout should not silently print nothing).
std::string fill_template(std::string_view tmpl, const std::map<std::string, std::string>& vars);

// Percent-encodes a path for use in a URL (keeps / and the unreserved characters).
std::string url_encode_path(std::string_view path);

}  // namespace minfer::book
