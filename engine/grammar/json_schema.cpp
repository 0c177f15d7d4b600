// The schema is translated to GBNF source, one rule a subschema, and compiled
// by parse_gbnf.
#include "engine/grammar/json_schema.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/grammar/gbnf.h"

namespace minfer::grammar {

namespace json = boost::json;

namespace {

// The JSON pieces every schema grammar uses.
constexpr const char* kBase = R"(ws ::= ( " " | "\n" [ \t]{0,20} )?
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-string ::= "\"" json-char* "\""
json-integer ::= "-"? ( "0" | [1-9] [0-9]* )
json-number ::= json-integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
)";

const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                            "$defs", "definitions", "deprecated", "readOnly", "writeOnly"};

class Compiler {
public:
    explicit Compiler(const json::value& root) : root_(root) {}

    std::string compile(std::string_view root_name) {
        const std::string start = rule_for(root_, "");
        return std::string(root_name) + " ::= " + start + "\n" + kBase + rules_;
    }

private:
    [[noreturn]] static void refuse(const std::string& pointer, const std::string& why) {
        throw GrammarError(0, 0, "at '" + (pointer.empty() ? std::string("#") : "#" + pointer) + "': " + why);
    }

    // The rule that matches what `schema` (at `pointer`) validates.
    std::string rule_for(const json::value& schema, const std::string& pointer) {
        if (auto it = names_.find(&schema); it != names_.end()) return it->second;
        const std::string name = "s" + std::to_string(names_.size());
        names_[&schema] = name;  // before the body: a $ref back here finds it
        rules_ += name + " ::= " + body(schema, pointer) + "\n";
        return name;
    }

    std::string body(const json::value& schema, const std::string& p) {
        if (schema.is_bool()) {
            if (!schema.get_bool()) refuse(p, "the schema false matches nothing");
            return "json-value";
        }
        if (!schema.is_object()) refuse(p, "a schema must be an object or a boolean");
        const json::object& s = schema.as_object();
        for (const auto& [key, v] : s) {
            const std::string k(key);
            static const std::set<std::string> kTaken = {
                "type",     "enum",      "const",    "properties", "required", "additionalProperties", "items",
                "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "anyOf",    "allOf",  "$ref"};
            if (!kTaken.count(k) && !kAnnotations.count(k)) refuse(p, "'" + k + "' is not supported yet");
        }
        if (s.contains("$ref")) {
            if (s.size() > 1 && std::any_of(s.begin(), s.end(), [](const auto& kv) {
                    return kv.key() != "$ref" && !kAnnotations.count(std::string(kv.key()));
                }))
                refuse(p, "'$ref' beside other keywords is not supported yet");
            return rule_for(resolve(s.at("$ref"), p), pointer_of(s.at("$ref")));
        }
        if (s.contains("allOf")) {
            const json::value& all = s.at("allOf");
            if (!all.is_array() || all.as_array().size() != 1 || s.size() > 1)
                refuse(p + "/allOf", "'allOf' with more than one schema (or beside other keywords) is not supported yet");
            return rule_for(all.as_array()[0], p + "/allOf/0");
        }
        if (s.contains("anyOf")) {
            const json::value& any = s.at("anyOf");
            if (!any.is_array() || any.as_array().empty()) refuse(p + "/anyOf", "'anyOf' must be a non-empty array");
            if (s.size() > 1 && std::any_of(s.begin(), s.end(), [](const auto& kv) {
                    return kv.key() != "anyOf" && !kAnnotations.count(std::string(kv.key()));
                }))
                refuse(p, "'anyOf' beside other keywords is not supported yet");
            std::string out = "(";
            for (size_t i = 0; i < any.as_array().size(); ++i)
                out += (i ? " | " : "") + rule_for(any.as_array()[i], p + "/anyOf/" + std::to_string(i));
            return out + ")";
        }
        if (s.contains("const")) return gbnf_literal(json::serialize(s.at("const")));
        if (s.contains("enum")) {
            const json::value& e = s.at("enum");
            if (!e.is_array() || e.as_array().empty()) refuse(p + "/enum", "'enum' must be a non-empty array");
            std::string out = "(";
            for (size_t i = 0; i < e.as_array().size(); ++i) out += (i ? " | " : "") + gbnf_literal(json::serialize(e.as_array()[i]));
            return out + ")";
        }
        std::vector<std::string> types;
        if (s.contains("type")) {
            const json::value& t = s.at("type");
            if (t.is_string()) {
                types.emplace_back(t.get_string());
            } else if (t.is_array()) {
                for (const json::value& x : t.as_array()) {
                    if (!x.is_string()) refuse(p + "/type", "'type' must be a string or an array of strings");
                    types.emplace_back(x.get_string());
                }
            } else {
                refuse(p + "/type", "'type' must be a string or an array of strings");
            }
        } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
            types = {"object"};
        } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
            types = {"array"};
        } else if (s.contains("minLength") || s.contains("maxLength")) {
            types = {"string"};
        } else {
            return "json-value";
        }
        std::string out = "(";
        for (size_t i = 0; i < types.size(); ++i) out += (i ? " | " : "") + of_type(types[i], s, p);
        return out + ")";
    }

    static int64_t count(const json::object& s, const char* key, const std::string& p, int64_t fallback) {
        if (!s.contains(key)) return fallback;
        const json::value& v = s.at(key);
        if (!v.is_int64() && !v.is_uint64()) refuse(p + "/" + key, std::string("'") + key + "' must be a non-negative integer");
        const int64_t n = v.is_int64() ? v.get_int64() : int64_t(std::min<uint64_t>(v.get_uint64(), 1u << 30));
        if (n < 0) refuse(p + "/" + key, std::string("'") + key + "' must be a non-negative integer");
        if (n > 10000) refuse(p + "/" + key, std::string("'") + key + "' above 10000 is not supported");
        return n;
    }
    static std::string repeat(const std::string& what, int64_t lo, int64_t hi) {
        if (hi < 0) return what + "{" + std::to_string(lo) + ",}";
        return what + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    }

    std::string of_type(const std::string& type, const json::object& s, const std::string& p) {
        if (type == "null") return "\"null\"";
        if (type == "boolean") return "(\"true\" | \"false\")";
        if (type == "integer") return "json-integer";
        if (type == "number") return "json-number";
        if (type == "string") {
            const int64_t lo = count(s, "minLength", p, 0), hi = count(s, "maxLength", p, -1);
            if (hi >= 0 && hi < lo) refuse(p, "'maxLength' is below 'minLength'");
            if (lo == 0 && hi < 0) return "json-string";
            return "\"\\\"\" " + repeat("json-char", lo, hi) + " \"\\\"\"";
        }
        if (type == "array") return array(s, p);
        if (type == "object") return object(s, p);
        refuse(p + "/type", "unknown type '" + type + "'");
    }

    // A rule for a JSON string that is none of `names`. Its characters are
    // written plainly (no escapes): an escaped key could spell a name and
    // escape that name's schema, so keys other than the named ones are held
    // to plain characters, which rejects a few valid texts and accepts no
    // invalid one. One rule a node of the names' trie (over code points).
    std::string key_not_in(const std::vector<std::string>& names) {
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
        const std::string id = "k" + std::to_string(keys_++) + "n";
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
            rules_ += id + std::to_string(i) + " ::= " + alts + "\n";
        }
        return "\"\\\"\" " + id + "0";
    }

    std::string array(const json::object& s, const std::string& p) {
        std::vector<std::string> prefix;
        if (s.contains("prefixItems")) {
            const json::value& pi = s.at("prefixItems");
            if (!pi.is_array()) refuse(p + "/prefixItems", "'prefixItems' must be an array");
            for (size_t i = 0; i < pi.as_array().size(); ++i)
                prefix.push_back(rule_for(pi.as_array()[i], p + "/prefixItems/" + std::to_string(i)));
        }
        std::string rest = "json-value";  // items past the prefix; "" if none may come
        if (s.contains("items")) {
            const json::value& it = s.at("items");
            rest = it.is_bool() && !it.get_bool() ? "" : rule_for(it, p + "/items");
        }
        const int64_t lo = count(s, "minItems", p, 0), hi = count(s, "maxItems", p, -1);
        if (hi >= 0 && hi < lo) refuse(p, "'maxItems' is below 'minItems'");
        // Element i (0-based) is prefix[i], then `rest`; between lo and cap of
        // them. T(i), what may follow the first i elements, is built from the
        // end: past the named positions, a run of `rest` up to the cap.
        const int64_t n = int64_t(prefix.size());
        const int64_t cap = hi >= 0 ? hi : (rest.empty() ? n : -1);
        if (rest.empty() && lo > n) refuse(p, "'minItems' needs more items than 'prefixItems' allows");
        if (cap == 0) return "\"[\" ws \"]\"";
        const auto element = [&](int64_t i) { return i < n ? prefix[size_t(i)] : rest; };
        const int64_t named = std::max<int64_t>({n, lo, 1});
        std::string next;  // T(named)
        if (!rest.empty() && (cap < 0 || cap > named))
            next = cap < 0 ? "( \",\" ws " + rest + " ws )*" : repeat("( \",\" ws " + rest + " ws )", 0, cap - named);
        for (int64_t i = named - 1; i >= 1; --i) {
            if (cap >= 0 && i >= cap) continue;  // T(i) is empty: nothing may follow
            const std::string item = "\",\" ws " + element(i) + " ws " + next;
            next = i >= lo ? "( " + item + " )?" : item;
        }
        const std::string first = element(0) + " ws " + next;
        return "\"[\" ws " + (lo >= 1 ? first : "( " + first + " )?") + " \"]\"";
    }

    std::string object(const json::object& s, const std::string& p) {
        std::vector<std::pair<std::string, std::string>> props;  // (name, value rule) in schema order
        if (s.contains("properties")) {
            const json::value& pr = s.at("properties");
            if (!pr.is_object()) refuse(p + "/properties", "'properties' must be an object");
            for (const auto& [name, sub] : pr.as_object())
                props.emplace_back(std::string(name), rule_for(sub, p + "/properties/" + std::string(name)));
        }
        std::set<std::string> required;
        if (s.contains("required")) {
            const json::value& r = s.at("required");
            if (!r.is_array()) refuse(p + "/required", "'required' must be an array of strings");
            for (const json::value& x : r.as_array()) {
                if (!x.is_string()) refuse(p + "/required", "'required' must be an array of strings");
                required.insert(std::string(x.get_string()));
            }
        }
        for (const std::string& r : required)
            if (std::none_of(props.begin(), props.end(), [&](const auto& pr) { return pr.first == r; }))
                refuse(p + "/required", "required property '" + r + "' is not in 'properties' (not supported yet)");
        const json::value* extra = s.if_contains("additionalProperties");
        const bool closed = extra && extra->is_bool() && !extra->get_bool();
        if (props.empty()) {
            if (closed) return "\"{\" ws \"}\"";
            const std::string v = extra ? rule_for(*extra, p + "/additionalProperties") : "json-value";
            return "\"{\" ws ( json-string ws \":\" ws " + v + " ws ( \",\" ws json-string ws \":\" ws " + v + " ws )* )? \"}\"";
        }
        // A(i): properties i.. with none written yet; B(i): with one written (a comma first).
        const size_t n = props.size();
        std::vector<std::string> a(n + 1), b(n + 1);
        if (!closed) {
            // Other properties come after the named ones: a key that names none of
            // them, and a value of additionalProperties' schema.
            std::vector<std::string> names;
            for (const auto& pr : props) names.push_back(pr.first);
            const std::string v = extra ? rule_for(*extra, p + "/additionalProperties") : "json-value";
            const std::string other = key_not_in(names) + " ws \":\" ws " + v + " ws";
            a[n] = "( " + other + " ( \",\" ws " + other + " )* )?";
            b[n] = "( \",\" ws " + other + " )*";
        }
        for (size_t i = n; i-- > 0;) {
            const std::string member = gbnf_literal(json::serialize(json::value(props[i].first))) + " ws \":\" ws " + props[i].second + " ws";
            const bool opt = !required.count(props[i].first);
            const std::string an = a[i + 1].empty() ? "" : " " + a[i + 1], bn = b[i + 1].empty() ? "" : " " + b[i + 1];
            const std::string a_name = "o" + std::to_string(objects_) + "a" + std::to_string(i);
            const std::string b_name = "o" + std::to_string(objects_) + "b" + std::to_string(i);
            rules_ += a_name + " ::= " + member + bn + (opt ? " | \"\"" + an : "") + "\n";
            rules_ += b_name + " ::= \",\" ws " + member + bn + (opt ? " | \"\"" + bn : "") + "\n";
            a[i] = a_name;
            b[i] = b_name;
        }
        ++objects_;
        return "\"{\" ws " + a[0] + " \"}\"";
    }

    std::string pointer_of(const json::value& ref) const { return ref.is_string() ? std::string(ref.get_string()).substr(1) : ""; }

    const json::value& resolve(const json::value& ref, const std::string& p) const {
        if (!ref.is_string()) refuse(p + "/$ref", "'$ref' must be a string");
        const std::string r(ref.get_string());
        if (r.empty() || r[0] != '#') refuse(p + "/$ref", "only references inside the schema ('#...') are supported");
        const json::value* v = &root_;
        size_t i = 1;
        while (i < r.size()) {
            if (r[i] != '/') refuse(p + "/$ref", "'" + r + "' is not a JSON pointer");
            const size_t next = r.find('/', i + 1);
            std::string key = r.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
            for (size_t at; (at = key.find("~1")) != std::string::npos;) key.replace(at, 2, "/");
            for (size_t at; (at = key.find("~0")) != std::string::npos;) key.replace(at, 2, "~");
            if (v->is_object() && v->as_object().contains(key)) {
                v = &v->as_object().at(key);
            } else if (v->is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) &&
                       std::stoul(key) < v->as_array().size()) {
                v = &v->as_array()[std::stoul(key)];
            } else {
                refuse(p + "/$ref", "'" + r + "' points at nothing");
            }
            i = next == std::string::npos ? r.size() : next;
        }
        return *v;
    }

    const json::value& root_;
    std::map<const json::value*, std::string> names_;
    std::string rules_;
    int objects_ = 0;
    int keys_ = 0;
};

}  // namespace

std::string json_schema_gbnf(const json::value& schema, std::string_view root_name) {
    return Compiler(schema).compile(root_name);
}

Grammar json_schema_grammar(const json::value& schema) {
    const std::string gbnf = json_schema_gbnf(schema, "root");
    try {
        return parse_gbnf(gbnf);
    } catch (const GrammarError& e) {
        throw GrammarError(0, 0, std::string("the schema compiles to a grammar that fails: ") + e.what());
    }
}

}  // namespace minfer::grammar
