// Server-sent events as OpenAI-compatible servers stream them: `data: ...`
// lines, an event ending at a blank line. Bytes arrive in arbitrary pieces (an
// event split across reads, or several in one read), so the parser keeps what
// it has not finished.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer::bench {

class SseParser {
public:
    // Feeds the next bytes; returns the data of every event they complete
    // (multi-line data joined with '\n'). Comments (`: ping`) and other fields
    // (event:, id:, retry:) are skipped.
    std::vector<std::string> feed(std::string_view bytes);
    // End of stream: an event whose closing blank line never came.
    std::vector<std::string> finish();

private:
    void take_line(std::string_view line, std::vector<std::string>& out);

    std::string partial_;  // bytes after the last '\n'
    std::string data_;     // the current event's data so far
    bool has_data_ = false;
};

}  // namespace minfer::bench
