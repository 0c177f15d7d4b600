#include "server/bench/sse_parser.h"

namespace minfer::bench {

std::vector<std::string> SseParser::feed(std::string_view bytes) {
    std::vector<std::string> out;
    partial_.append(bytes);
    size_t begin = 0;
    for (size_t nl; (nl = partial_.find('\n', begin)) != std::string::npos; begin = nl + 1) {
        std::string_view line(partial_.data() + begin, nl - begin);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        take_line(line, out);
    }
    partial_.erase(0, begin);
    return out;
}

std::vector<std::string> SseParser::finish() {
    std::vector<std::string> out;
    if (!partial_.empty()) take_line(partial_, out);
    partial_.clear();
    take_line("", out);
    return out;
}

void SseParser::take_line(std::string_view line, std::vector<std::string>& out) {
    if (line.empty()) {  // blank line: the event is complete
        if (has_data_) out.push_back(std::move(data_));
        data_.clear();
        has_data_ = false;
        return;
    }
    if (line.substr(0, 5) != "data:") return;  // comment or another field
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (has_data_) data_ += '\n';
    data_.append(line);
    has_data_ = true;
}

}  // namespace minfer::bench
