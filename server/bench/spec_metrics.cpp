#include "server/bench/spec_metrics.h"

#include <charconv>
#include <string>

namespace minfer::bench {

namespace {

// "minfer:spec_decode_num_drafts_total" -> "num_drafts"; "" for other metrics.
std::string_view spec_name(std::string_view name) {
    for (std::string_view prefix : {"minfer:spec_decode_", "vllm:spec_decode_"})
        if (name.starts_with(prefix)) {
            name.remove_prefix(prefix.size());
            if (name.ends_with("_total")) name.remove_suffix(6);
            return name;
        }
    return {};
}

// The value of label `key` in `{a="x",key="3"}`, or "".
std::string_view label(std::string_view labels, std::string_view key) {
    const std::string needle = std::string(key) + "=\"";
    const size_t at = labels.find(needle);
    if (at == std::string_view::npos) return {};
    const size_t from = at + needle.size(), to = labels.find('"', from);
    return to == std::string_view::npos ? std::string_view{} : labels.substr(from, to - from);
}

}  // namespace

std::optional<SpecCounters> parse_spec_counters(std::string_view text) {
    SpecCounters c;
    bool found = false;
    while (!text.empty()) {
        const size_t eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
        if (line.empty() || line[0] == '#') continue;
        const size_t name_end = line.find_first_of("{ ");
        if (name_end == std::string_view::npos) continue;
        const std::string_view name = spec_name(line.substr(0, name_end));
        if (name.empty()) continue;
        std::string_view labels;
        size_t value_at = name_end;
        if (line[name_end] == '{') {
            const size_t close = line.find('}', name_end);
            if (close == std::string_view::npos) continue;
            labels = line.substr(name_end, close - name_end + 1);
            value_at = close + 1;
        }
        const size_t v0 = line.find_first_not_of(' ', value_at);
        if (v0 == std::string_view::npos) continue;
        const std::string_view number = line.substr(v0, line.find(' ', v0) - v0);
        double value = 0;
        if (std::from_chars(number.data(), number.data() + number.size(), value).ec != std::errc{}) continue;
        if (name == "num_drafts") {
            c.drafts += value;
            found = true;
        } else if (name == "num_draft_tokens") {
            c.draft_tokens += value;
        } else if (name == "num_accepted_tokens") {
            c.accepted += value;
        } else if (name == "num_accepted_tokens_per_pos") {
            const std::string_view pos = label(labels, "position");
            size_t i = 0;
            if (std::from_chars(pos.data(), pos.data() + pos.size(), i).ec != std::errc{} || i > 1024) continue;
            if (c.accepted_per_pos.size() <= i) c.accepted_per_pos.resize(i + 1, 0.0);
            c.accepted_per_pos[i] += value;
        }
    }
    if (!found) return std::nullopt;
    return c;
}

SpecCounters spec_difference(const SpecCounters& after, const SpecCounters& before) {
    SpecCounters d{after.drafts - before.drafts, after.draft_tokens - before.draft_tokens,
                   after.accepted - before.accepted, after.accepted_per_pos};
    for (size_t i = 0; i < d.accepted_per_pos.size() && i < before.accepted_per_pos.size(); ++i)
        d.accepted_per_pos[i] -= before.accepted_per_pos[i];
    return d;
}

}  // namespace minfer::bench
