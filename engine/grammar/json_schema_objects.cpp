#include "engine/grammar/json_schema_objects.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <functional>
#include <map>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar.h"

namespace minfer::grammar {

namespace json = boost::json;

std::string key_not_in_gbnf(const std::vector<std::string>& names, const std::string& id, std::string& rules) {
    struct Node {
        std::map<uint32_t, size_t> children;
        bool is_name = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : names) {
        size_t node = 0;
        bool plain = true;
        std::vector<uint32_t> cps;
        for (size_t i = 0; i < name.size();) {
            const int32_t c = next_code_point(name, i);
            if (c < 0) ++i;  // not UTF-8: never a plain key
            const uint32_t cp = c < 0 ? 0 : uint32_t(c);
            plain = plain && cp >= 0x20 && cp != '"' && cp != '\\';
            cps.push_back(cp);
        }
        if (!plain) continue;  // it cannot be written without escapes: no plain key equals it
        for (const uint32_t cp : cps) {
            auto [it, added] = trie[node].children.emplace(cp, trie.size());
            if (added) trie.emplace_back();
            node = it->second;
        }
        trie[node].is_name = true;
    }
    auto escape = [](uint32_t cp) {  // as GBNF writes a code point in a string or class
        char buf[16];
        std::snprintf(buf, sizeof buf, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", unsigned(cp));
        return std::string(buf);
    };
    for (size_t i = 0; i < trie.size(); ++i) {
        std::string alts, excluded;
        if (!trie[i].is_name) alts = "\"\\\"\"";
        for (const auto& [cp, child] : trie[i].children) {
            alts += std::string(alts.empty() ? "" : " | ") + "\"" + escape(cp) + "\" " + id + std::to_string(child);
            excluded += escape(cp);
        }
        alts += std::string(alts.empty() ? "" : " | ") + "[^\"\\\\\\x00-\\x1F" + excluded + "] [^\"\\\\\\x00-\\x1F]* \"\\\"\"";
        rules += id + std::to_string(i) + " ::= " + alts + "\n";
    }
    return "\"\\\"\" " + id + "0";
}

std::optional<std::string> object_members_gbnf(const ObjectMembers& m, const std::string& id, std::string& rules) {
    const auto& props = m.properties;
    const size_t n = props.size();
    const int64_t min_p = m.min_properties, max_p = m.max_properties;
    const int64_t top = max_p >= 0 ? max_p : std::max<int64_t>(min_p, 1);
    const bool closed = m.other.empty();
    const std::string& other = m.other;
    const auto& required = m.required;
    auto repeat = [](const std::string& what, int64_t hi) { return what + "{0," + std::to_string(hi) + "}"; };
    std::map<std::pair<size_t, int64_t>, std::optional<std::string>> states;
    std::function<std::optional<std::string>(size_t, int64_t)> state = [&](size_t i, int64_t c) -> std::optional<std::string> {
        if (auto it = states.find({i, c}); it != states.end()) return it->second;
        const std::string comma = c > 0 ? "\",\" ws " : "";
        std::vector<std::string> alts;
        if (i == n) {  // other properties, k of them: min_p - c <= min(k, 1), c + k <= max_p
            const int64_t need = std::max<int64_t>(min_p - c, 0), room = max_p >= 0 ? max_p - c : -1;
            if (need == 0) alts.push_back("\"\"");
            if (!closed && need <= 1 && room != 0)
                alts.push_back(comma + other + (room < 0   ? " ( \",\" ws " + other + " )*"
                                                : room == 1 ? ""
                                                            : " " + repeat("( \",\" ws " + other + " )", room - 1)));
        } else {
            const std::string member = comma + gbnf_literal(json::serialize(json::value(props[i].first))) + " ws \":\" ws " + props[i].second + " ws";
            if (max_p < 0 || c < max_p)
                if (auto next = state(i + 1, max_p >= 0 ? c + 1 : std::min(c + 1, top))) alts.push_back(member + " " + *next);
            if (!required.count(props[i].first))
                if (auto next = state(i + 1, c)) alts.push_back(*next);
        }
        std::optional<std::string> name;
        if (!alts.empty()) {
            name = id + "s" + std::to_string(i) + "c" + std::to_string(c);
            rules += *name + " ::= " + alts[0];
            for (size_t k = 1; k < alts.size(); ++k) rules += " | " + alts[k];
            rules += "\n";
        }
        return states[{i, c}] = name;
    };
    return state(0, 0);
}

}  // namespace minfer::grammar
