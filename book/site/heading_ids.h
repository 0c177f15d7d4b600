// Anchors on a page's headings, GitHub's way: <h2>How big it is</h2> becomes
// <h2 id="how-big-it-is">, so readers and agents can link into a page.
#pragma once

#include <string>
#include <string_view>

namespace minfer::book {

// `html` with an id on every <h1>..<h6> that has no attributes (cmark writes
// none); the id is the heading's text, lower-case, words joined by '-';
// repeats within the page get -2, -3, ...
std::string add_heading_ids(std::string_view html);

}  // namespace minfer::book
