#include "engine/text/unicode_text.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>
#include <memory>

namespace minfer::unicode {

size_t valid_sequence_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
    const uint8_t c = b(0);
    if (c < 0x80) return 1;
    size_t n;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    if (b(1) < lo || b(1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if (b(k) < 0x80 || b(k) > 0xBF) return 0;
    return n;
}

bool is_valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const size_t n = valid_sequence_length(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string repair_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const size_t n = valid_sequence_length(s, i);
        if (n == 0) {
            out.append(kReplacementChar);
            i += 1;
        } else {
            out.append(s.substr(i, n));
            i += n;
        }
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

char32_t code_point_at(std::string_view s, size_t i, size_t* length) {
    const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<uint8_t>(s[i + k])); };
    const char32_t c = b(0);
    if (c < 0x80) {
        *length = 1;
        return c;
    }
    if (c < 0xE0) {
        *length = 2;
        return ((c & 0x1F) << 6) | (b(1) & 0x3F);
    }
    if (c < 0xF0) {
        *length = 3;
        return ((c & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    }
    *length = 4;
    return ((c & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

std::vector<char32_t> code_points(std::string_view s) {
    std::vector<char32_t> out;
    out.reserve(s.size());
    for (size_t i = 0, n = 0; i < s.size(); i += n) out.push_back(code_point_at(s, i, &n));
    return out;
}

namespace {

struct ByteAlphabet {
    std::array<std::string, 256> symbol_of_byte;
    std::array<int16_t, 0x144> byte_of_symbol;  // stand-ins are all below U+0144

    ByteAlphabet() {
        byte_of_symbol.fill(-1);
        const auto stands_for_itself = [](int b) {
            return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        int next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const char32_t cp = stands_for_itself(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
            append_utf8(symbol_of_byte[static_cast<size_t>(b)], cp);
            byte_of_symbol[cp] = static_cast<int16_t>(b);
        }
    }
};

const ByteAlphabet& byte_alphabet() {
    static const ByteAlphabet alphabet;
    return alphabet;
}

utf8proc_category_t category(char32_t cp) {
    return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

}  // namespace

const std::string& byte_to_symbol(uint8_t byte) { return byte_alphabet().symbol_of_byte[byte]; }

int symbol_to_byte(char32_t cp) {
    const auto& table = byte_alphabet().byte_of_symbol;
    return cp < table.size() ? table[cp] : -1;
}

std::string bytes_to_symbols(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) out.append(byte_to_symbol(static_cast<uint8_t>(c)));
    return out;
}

bool is_white_space(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

bool is_control(char32_t cp) {
    switch (category(cp)) {
        case UTF8PROC_CATEGORY_CC:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_CS:
        case UTF8PROC_CATEGORY_CO:
            return true;
        default:
            return false;
    }
}

bool is_punctuation(char32_t cp) {
    const auto c = category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool is_symbol(char32_t cp) {
    const auto c = category(cp);
    return c >= UTF8PROC_CATEGORY_SM && c <= UTF8PROC_CATEGORY_SO;
}

bool is_mark(char32_t cp) {
    const auto c = category(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

char32_t to_lower(char32_t cp) {
    return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

std::string nfd(std::string_view s) {
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                     &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
    const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
    if (n < 0) return std::string(s);  // cannot happen for valid UTF-8
    return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

}  // namespace minfer::unicode
