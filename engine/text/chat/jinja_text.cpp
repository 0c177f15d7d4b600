#include "engine/text/chat/jinja_text.h"

#include "engine/text/unicode_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace minfer::jinja::text {

char32_t next_code_point(std::string_view s, size_t& pos) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    if (b0 < 0x80) {
        ++pos;
        return b0;
    }
    const size_t len = (b0 >= 0xC2 && b0 <= 0xDF) ? 2 : (b0 >= 0xE0 && b0 <= 0xEF) ? 3 : (b0 >= 0xF0 && b0 <= 0xF4) ? 4 : 0;
    if (len == 0 || pos + len > s.size()) {
        ++pos;
        return kRawByte + b0;
    }
    char32_t cp = b0 & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[pos + k]);
        if ((b & 0xC0) != 0x80) {
            ++pos;
            return kRawByte + b0;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        ++pos;
        return kRawByte + b0;
    }
    pos += len;
    return cp;
}

std::u32string decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) out.push_back(next_code_point(s, pos));
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp >= kRawByte) out.push_back(static_cast<char>(cp - kRawByte));  // a byte that was not UTF-8, as it came
    else unicode::append_utf8(out, cp);
}

std::string encode(std::u32string_view cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) append_utf8(out, c);
    return out;
}

size_t code_point_count(std::string_view s) {
    size_t n = 0;
    for (size_t pos = 0; pos < s.size(); ++n) next_code_point(s, pos);
    return n;
}

bool is_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
    if (c >= kRawByte) return false;
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
    if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
        (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB))
        return false;
    if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFFFE || c == 0xFFFF || c >= 0xF0000) return false;  // surrogates, private use
    if (c >= 0xE0000 && c <= 0xE007F) return false;  // tags
    return true;
}

bool is_alnum(char32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (c == 0xAA || c == 0xB5 || c == 0xBA) return true;
    if (c >= 0xC0 && c <= 0x24F) return c != 0xD7 && c != 0xF7;
    if (c >= 0x370 && c <= 0x52F) return c != 0x37E && c != 0x387;  // Greek, Cyrillic
    if (c >= 0x3040 && c <= 0x30FF) return c != 0x30A0 && c != 0x30FB;  // kana
    if (c >= 0x4E00 && c <= 0x9FFF) return true;  // CJK ideographs
    if (c >= 0xAC00 && c <= 0xD7A3) return true;  // Hangul
    return false;
}

char32_t to_upper(char32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if (c == 0xB5) return 0x39C;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c == 0x131) return 'I';
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c & 1) ? c - 1 : c;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
    if (c == 0x3C2) return 0x3A3;  // final sigma
    if (c >= 0x3B1 && c <= 0x3CB) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

char32_t to_lower(char32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x178) return 0xFF;
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c & 1) ? c : c + 1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c || c == 0xDF; }

namespace {

void append_upper(std::string& out, char32_t c) {
    if (c == 0xDF) {  // ß has no single-letter capital: Python gives "SS"
        out += "SS";
        return;
    }
    append_utf8(out, to_upper(c));
}

}  // namespace

std::string upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) append_upper(out, next_code_point(s, pos));
    return out;
}

std::string lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) append_utf8(out, to_lower(next_code_point(s, pos)));
    return out;
}

namespace {

// Upper-cases the code points for which `starts_word(c)` holds and lower-cases
// the rest. An uncased code point maps to itself either way.
template <typename StartsWord>
std::string recase_words(std::string_view s, StartsWord starts_word) {
    std::string out;
    for (size_t pos = 0; pos < s.size();) {
        const char32_t c = next_code_point(s, pos);
        if (starts_word(c)) append_upper(out, c);
        else append_utf8(out, to_lower(c));
    }
    return out;
}

}  // namespace

std::string title(std::string_view s) {
    bool previous_cased = false;  // a word is a run of cased code points
    return recase_words(s, [&](char32_t c) { return !std::exchange(previous_cased, is_cased(c)); });
}

std::string capitalize(std::string_view s) {
    bool first = true;
    return recase_words(s, [&](char32_t) { return std::exchange(first, false); });
}

std::string strip(std::string_view s, bool left, bool right, const std::u32string* chars) {
    const std::u32string cps = decode(s);
    auto stripped = [&](char32_t c) { return chars ? chars->find(c) != std::u32string::npos : is_space(c); };
    size_t begin = 0, end = cps.size();
    if (left)
        while (begin < end && stripped(cps[begin])) ++begin;
    if (right)
        while (end > begin && stripped(cps[end - 1])) --end;
    return encode(std::u32string_view(cps).substr(begin, end - begin));
}

bool all_space(std::string_view s) {
    if (s.empty()) return false;
    for (size_t pos = 0; pos < s.size();)
        if (!is_space(next_code_point(s, pos))) return false;
    return true;
}

std::vector<std::string> splitlines(std::string_view s) {
    std::vector<std::string> lines;
    std::string line;
    bool open = false;  // a line has started and not ended
    for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        const char32_t c = next_code_point(s, pos);
        const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                              c == 0x85 || c == 0x2028 || c == 0x2029;
        if (boundary) {
            if (c == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
            lines.push_back(std::move(line));
            line.clear();
            open = false;
        } else {
            line.append(s.substr(start, pos - start));
            open = true;
        }
    }
    if (open) lines.push_back(std::move(line));
    return lines;
}

std::string float_repr(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    // The shortest digits that round-trip (what Python's repr uses), then
    // Python's layout: fixed notation for 1e-4 <= |x| < 1e16, else exponent.
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
    std::string out;
    if (sci.front() == '-') {
        out = "-";
        sci.remove_prefix(1);
    }
    const size_t e = sci.find('e');
    std::string digits;
    for (char c : sci.substr(0, e))
        if (c != '.') digits.push_back(c);
    const int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
    const int decpt = exp10 + 1;  // digits d1d2... mean 0.d1d2... × 10^decpt
    const int ndigits = static_cast<int>(digits.size());
    if (decpt <= -4 || decpt > 16) {
        out += digits[0];
        if (ndigits > 1) {
            out += '.';
            out.append(digits, 1);
        }
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
        out += eb;
    } else if (decpt <= 0) {
        out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (decpt >= ndigits) {
        out += digits + std::string(static_cast<size_t>(decpt - ndigits), '0') + ".0";
    } else {
        out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
    return out;
}

std::string python_quote(std::string_view s) {
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, quote);
    for (size_t pos = 0; pos < s.size();) {
        const char32_t c = next_code_point(s, pos);
        char buf[16];
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c >= kRawByte) {
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c - kRawByte));
            out += buf;
        } else if (!is_printable(c)) {
            if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
            else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
            out += buf;
        } else {
            append_utf8(out, c);
        }
    }
    out.push_back(quote);
    return out;
}

void append_json_string(std::string& out, std::string_view s) {
    out.push_back('"');
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out.push_back(ch);  // ensure_ascii=False: everything else as it is
                }
        }
    }
    out.push_back('"');
}

std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '\'': out += "&#39;"; break;
            case '"': out += "&#34;"; break;
            default: out.push_back(c);
        }
    }
    return out;
}

}  // namespace minfer::jinja::text
