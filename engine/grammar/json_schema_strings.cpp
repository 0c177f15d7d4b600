#include "engine/grammar/json_schema_strings.h"

#include <algorithm>

namespace minfer::grammar {

void schema_error(const std::string& pointer, const std::string& why) {
    throw GrammarError(0, 0, "at '" + (pointer.empty() ? std::string("#") : "#" + pointer) + "': " + why);
}

// Whether a pattern is anchored at its start (^) and end ($); an anchor
// anywhere else, or beside a top-level alternation, is refused (its
// meaning would differ from branch to branch).
std::pair<bool, bool> pattern_anchors(const std::string& re, const std::string& at) {
    bool in_class = false, alternation = false, misplaced = false;
    int depth = 0;
    for (size_t i = 0; i < re.size(); ++i) {
        const char c = re[i];
        if (c == '\\') {
            ++i;
        } else if (in_class) {
            in_class = c != ']';
        } else if (c == '[') {
            in_class = true;
        } else if (c == '(') {
            ++depth;
        } else if (c == ')') {
            --depth;
        } else if (c == '|' && depth == 0) {
            alternation = true;
        } else if ((c == '^' && i != 0) || (c == '$' && i + 1 != re.size())) {
            misplaced = true;
        }
    }
    const bool start = !re.empty() && re[0] == '^';
    const bool end = re.size() >= 2 ? re.back() == '$' && re[re.size() - 2] != '\\' : re == "$";
    if (misplaced || (alternation && (start || end)))
        schema_error(at, "anchors ('^', '$') other than around the whole pattern are not supported yet");
    return {start, end};
}

// The formats taken, as anchored patterns of what RFC 3339 and friends allow
// (no leap seconds, an upper-case T and Z, dot-atom e-mail addresses).
std::string format_pattern(const std::string& format, const std::string& at) {
    static const std::string kDate =
        "(\\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|\\d{4}-(0[469]|11)-(0[1-9]|[12]\\d|30)|"
        "\\d{4}-02-(0[1-9]|1\\d|2[0-8])|(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)";
    static const std::string kTime = "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d+)?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)";
    static const std::string kOctet = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
    static const std::string kAtom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
    static const std::string kLabel = "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?";
    static const std::string kUriChar = "([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})";
    if (format == "date") return "^" + kDate + "$";
    if (format == "time") return "^" + kTime + "$";
    if (format == "date-time") return "^" + kDate + "T" + kTime + "$";
    if (format == "uuid") return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
    if (format == "ipv4") return "^" + kOctet + "(\\." + kOctet + "){3}$";
    if (format == "email") return "^" + kAtom + "(\\." + kAtom + ")*@" + kLabel + "(\\." + kLabel + ")*$";
    if (format == "uri") return "^[A-Za-z][A-Za-z0-9+.-]*:" + kUriChar + "*(#" + kUriChar + "*)?$";
    schema_error(at, "format '" + format + "' is not supported yet");
}

// A pattern's characters inside a JSON string, written plainly: not '"', '\\'
// or a control character (those would need escapes, which the pattern's
// classes do not spell).
void restrict_patterns(Grammar& g, const std::vector<std::string>& pattern_rules) {
    for (Rule& rule : g.rules) {
        const bool in_pattern = std::any_of(pattern_rules.begin(), pattern_rules.end(), [&](const std::string& p) {
            return rule.name == p || rule.name.starts_with(p + "_");
        });
        if (!in_pattern) continue;
        for (Sequence& alt : rule.alternatives)
            for (Symbol& sym : alt) {
                if (sym.kind != Symbol::Kind::Char) continue;
                CharClass& c = g.classes[size_t(sym.index)];
                std::vector<std::pair<uint32_t, uint32_t>> kept;
                for (const auto& [lo, hi] : c.ranges)
                    for (const auto& [alo, ahi] : {std::pair<uint32_t, uint32_t>{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}})
                        if (std::max(lo, alo) <= std::min(hi, ahi)) kept.emplace_back(std::max(lo, alo), std::min(hi, ahi));
                c.ranges = std::move(kept);
            }
    }
}

}  // namespace minfer::grammar
