// UTF-8 and Unicode helpers the tokenizers share: validation and repair,
// code points in and out, GPT-2's byte-level alphabet, and the character
// classes WordPiece needs (from utf8proc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::unicode {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i], or 0 if none starts there (a
// bad lead byte, truncated, overlong, a surrogate, above U+10FFFF).
size_t valid_sequence_length(std::string_view s, size_t i);

bool is_valid_utf8(std::string_view s);

// Each byte that does not start a valid sequence becomes one U+FFFD. The rule
// is local: repairing a prefix of a string gives a prefix of the repaired
// string, except at a cut inside a character (IncrementalDetokenizer relies on it).
std::string repair_utf8(std::string_view s);

void append_utf8(std::string& out, char32_t cp);
// Code points of valid UTF-8 (callers repair first).
std::vector<char32_t> code_points(std::string_view valid_utf8);
// The code point at s[i] (valid UTF-8), and how many bytes it takes.
char32_t code_point_at(std::string_view valid_utf8, size_t i, size_t* length);

// GPT-2's byte-level alphabet: every byte has a printable stand-in character
// (bytes that are printable Latin-1 stand for themselves, the other 68 map to
// U+0100..U+0143), so that a byte string becomes text a BPE vocabulary spells.
const std::string& byte_to_symbol(uint8_t byte);  // UTF-8 of the stand-in
int symbol_to_byte(char32_t cp);                   // -1 if cp stands for no byte
std::string bytes_to_symbols(std::string_view bytes);

// Character classes (utf8proc's Unicode tables).
bool is_white_space(char32_t cp);   // the Unicode White_Space property
bool is_control(char32_t cp);       // Cc, Cf, Cs, Co
bool is_punctuation(char32_t cp);   // P*
bool is_symbol(char32_t cp);        // S*
bool is_mark(char32_t cp);          // Mn, Mc, Me
char32_t to_lower(char32_t cp);
// Canonical decomposition (NFD) of valid UTF-8.
std::string nfd(std::string_view valid_utf8);

}  // namespace minfer::unicode
