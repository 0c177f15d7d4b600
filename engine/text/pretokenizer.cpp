#include "engine/text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include <map>

#include "engine/text/tokenizer.h"
#include "engine/text/unicode_text.h"

namespace minfer {

namespace {

// The regexes, as llama.cpp's llama-vocab.cpp spells them. Non-ASCII
// characters are written as \x{...}: several of DeepSeek's range ends are
// compatibility characters (U+212A KELVIN SIGN, U+2126 OHM SIGN, ...) that a
// Unicode-normalizing editor would silently turn into other code points.
const std::string kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const std::string kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// BLOOM's: everything up to a space or one of these punctuation marks (the
// parentheses and | are literal members of the class, as in the original).
const std::string kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";
// DeepSeek LLM's cased letters (Unicode's L& ranges, frozen as DeepSeek wrote them).
const std::string kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
const std::string kDeepseekPunct = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
const std::string kCjkHangul = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

std::map<std::string, BpePreset, std::less<>> make_presets() {
    const BpePreset gpt2{{kGpt2}, false, false};
    const BpePreset llama3{{kLlama3}, true, true};
    const BpePreset llama3_regex_only{{kLlama3}, false, false};
    const BpePreset qwen2{{kQwen2}, false, false};
    const BpePreset starcoder{{R"(\p{N})", kGpt2}, false, false};
    const BpePreset bloom{{kBloom}, false, false};

    std::map<std::string, BpePreset, std::less<>> p;
    p["default"] = {{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, false, false};
    for (const char* n : {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral"}) p[n] = llama3;
    for (const char* n : {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}) p[n] = llama3_regex_only;
    for (const char* n : {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}) p[n] = qwen2;
    for (const char* n : {"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v1-en",
                          "jina-v2-code", "roberta-bpe", "gigachat", "mpt", "olmo", "jais"})
        p[n] = gpt2;
    for (const char* n : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})
        p[n] = starcoder;
    for (const char* n : {"poro-chat", "bloom", "gpt3-finnish"}) p[n] = bloom;
    p["viking"] = {{kBloom, R"(\p{N})"}, false, false};
    p["falcon"] = {{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}, false, false};
    p["deepseek-llm"] = {{"[\\r\\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjkHangul, R"(\p{N}+)"}, false, false};
    p["deepseek-coder"] = {{"[\\r\\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"}, false, false};
    p["tekken"] = {{kTekken}, true, true};
    p["chameleon"] = {{"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"(([\t\n]|    |  ))", R"(\p{N})",
                       R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
                      false,
                      true};
    return p;
}

std::string pcre2_error_text(int code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof(buf));
    return reinterpret_cast<const char*>(buf);
}

}  // namespace

const BpePreset& bpe_preset(std::string_view pre) {
    static const auto presets = make_presets();
    const auto it = presets.find(pre.empty() ? std::string_view("default") : pre);
    if (it == presets.end())
        throw TokenizerError(fmt::format("pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported", pre));
    return it->second;
}

std::string translate_regex_for_pcre2(std::string_view re) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < re.size(); ++i) {
        const char c = re[i];
        if (c == '\\' && i + 1 < re.size()) {
            const char e = re[++i];
            if (e == 's') {
                out += in_class ? R"(\s\x{85})" : R"([\s\x{85}])";
            } else if (e == 'S') {
                if (in_class) throw TokenizerError("\\S inside a character class cannot be translated");
                out += R"([^\s\x{85}])";
            } else {
                out.push_back('\\');
                out.push_back(e);
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            out.push_back(c);
            // A ']' right after '[' or '[^' is a literal member, not the end.
            if (i + 1 < re.size() && re[i + 1] == '^') out.push_back(re[++i]);
            if (i + 1 < re.size() && re[i + 1] == ']') out.push_back(re[++i]);
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        out.push_back(c);
    }
    return out;
}

struct RegexSplitter::Compiled {
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& regexes) {
    for (const std::string& re : regexes) {
        const std::string pattern = translate_regex_for_pcre2(re);
        int error = 0;
        PCRE2_SIZE error_offset = 0;
        // DOLLAR_ENDONLY: std::regex's $ (llama.cpp's) never matches before a final newline.
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &error_offset, nullptr);
        if (!code)
            throw TokenizerError(fmt::format("pre-tokenizer regex /{}/ does not compile at offset {}: {}", pattern,
                                             error_offset, pcre2_error_text(error)));
        auto c = std::make_unique<Compiled>();
        c->code = code;
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT, pcre2_match interprets: slower, same result
        compiled_.push_back(std::move(c));
    }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (text.empty()) return pieces;
    pieces.push_back(text);
    std::vector<std::string_view> next;
    for (const auto& c : compiled_) {
        const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
            pcre2_match_data_create_from_pattern(c->code, nullptr), &pcre2_match_data_free);
        next.clear();
        for (const std::string_view piece : pieces) {
            const auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
            size_t kept = 0;  // piece[:kept] is already in `next`
            for (size_t start = 0; start < piece.size();) {
                int rc = pcre2_match(c->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep backtracking: the interpreter keeps its stack on the heap
                    rc = pcre2_match(c->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                                     match.get(), nullptr);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) throw TokenizerError("pre-tokenizer regex failed: " + pcre2_error_text(rc));
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
                const size_t begin = ov[0], end = ov[1];
                if (begin == end) {  // an empty match cuts nothing: step over one character
                    if (begin >= piece.size()) break;
                    size_t n = 0;
                    unicode::code_point_at(piece, begin, &n);
                    start = begin + n;
                    continue;
                }
                // The text between two matches stays a piece of its own.
                if (begin > kept) next.push_back(piece.substr(kept, begin - kept));
                next.push_back(piece.substr(begin, end - begin));
                kept = start = end;
            }
            if (kept < piece.size()) next.push_back(piece.substr(kept));
        }
        std::swap(pieces, next);
    }
    return pieces;
}

}  // namespace minfer
