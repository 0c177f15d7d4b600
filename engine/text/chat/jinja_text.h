// Python's text semantics on UTF-8 strings, as the Jinja interpreter needs
// them: strings index by code point, str.strip() knows Unicode whitespace,
// str(1.0) is "1.0", repr() quotes, json.dumps(ensure_ascii=False) escapes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer::jinja::text {

// A byte that is not part of valid UTF-8 decodes to kRawByte + byte, and
// encodes back to that byte: any input survives slicing unchanged.
constexpr char32_t kRawByte = 0x110000;

char32_t next_code_point(std::string_view s, size_t& pos);  // decodes at pos, advances pos
std::u32string decode(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode(std::u32string_view cps);
size_t code_point_count(std::string_view s);

bool is_space(char32_t c);  // Python str.isspace() (also what re's \s matches)
bool is_printable(char32_t c);  // Python str.isprintable(), for repr()
bool is_alnum(char32_t c);  // letters and digits (ASCII, Latin-1, Greek, Cyrillic, CJK), for \w
char32_t to_upper(char32_t c);  // simple case mapping: ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // Python str.title()
std::string capitalize(std::string_view s);  // Python str.capitalize()

// Python str.strip/lstrip/rstrip: Unicode whitespace, or any code point in `chars`.
std::string strip(std::string_view s, bool left, bool right, const std::u32string* chars = nullptr);
bool all_space(std::string_view s);  // non-empty and only whitespace (re.fullmatch(r"\s+"))

std::vector<std::string> splitlines(std::string_view s);  // Python str.splitlines()

std::string float_repr(double x);             // Python repr(float): 1.0, 1e+16, 1.5e-05, inf, nan
std::string python_quote(std::string_view s);  // Python repr(str): 'it''s' → "it's"
void append_json_string(std::string& out, std::string_view s);  // json.dumps(s, ensure_ascii=False)
std::string html_escape(std::string_view s);  // markupsafe.escape: & < > ' "

}  // namespace minfer::jinja::text
