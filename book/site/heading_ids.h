// Anchors on a page's headings, GitHub's way: <h2>How big it is</h2> becomes
// <h2 id="how-big-it-is">, so readers and agents can link into a page; a
// permalink (#) after each h2-h4 shows the link; and the page's outline for
// its own table of contents.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer::book {

// `html` with an id on every <h1>..<h6> that has no attributes (cmark writes
// none); the id is the heading's text, lower-case, words joined by '-';
// repeats within the page get -2, -3, ...
// h2 to h4 also get <a class="permalink" href="#ID">#</a> after their text.
std::string add_heading_ids(std::string_view html);

struct Heading {
    int level = 2;       // 2 or 3
    std::string id;      // the anchor add_heading_ids gave it
    std::string text;    // its text as HTML, tags dropped
};
// The h2 and h3 headings of HTML that add_heading_ids made, in order.
std::vector<Heading> page_outline(std::string_view html);

}  // namespace minfer::book
