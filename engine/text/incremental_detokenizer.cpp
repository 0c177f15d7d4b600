#include "engine/text/tokenizer.h"

namespace minfer {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

size_t common_prefix_length(std::string_view a, std::string_view b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

}  // namespace

// Why the prefix window must decode to some text (or start at id 0): decode()
// drops the dummy-prefix space of the first piece that makes text. A window
// whose first ids make none (BOS, a lone "▁") would drop the space of the
// next piece, which inside the whole sequence keeps it.
IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, std::vector<int32_t> context)
    : tok_(tok), ids_(std::move(context)) {
    read_offset_ = ids_.size();
    prefix_offset_ = read_offset_;
    const std::span<const int32_t> all(ids_);
    // The window also should not begin inside a character (a byte token that
    // continues one): step back over up to three such bytes.
    int continuation_bytes = 0;
    while (prefix_offset_ > 0) {
        --prefix_offset_;
        prefix_text_ = tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_));
        if (prefix_text_.empty()) continue;
        if (prefix_text_.starts_with(kReplacement) && ++continuation_bytes <= 3) continue;
        break;
    }
}

std::string IncrementalDetokenizer::push(int32_t id) {
    ids_.push_back(id);
    return emit(false);
}

std::string IncrementalDetokenizer::peek(int32_t id) const {
    std::vector<int32_t> window(ids_.begin() + std::ptrdiff_t(prefix_offset_), ids_.end());
    window.push_back(id);
    const std::string text = tok_.decode(window);
    if (text.ends_with(kReplacement)) return {};
    return text.substr(common_prefix_length(prefix_text_, text));
}

std::string IncrementalDetokenizer::flush() { return emit(true); }

std::string IncrementalDetokenizer::emit(bool final) {
    const std::span<const int32_t> all(ids_);
    std::string text = tok_.decode(all.subspan(prefix_offset_));
    // A character whose bytes have not all arrived decodes as U+FFFD at the end.
    if (!final && text.ends_with(kReplacement)) return {};

    // prefix_text_ is normally a prefix of text; it is not when the context
    // ended inside a character that this id completes.
    std::string out = text.substr(common_prefix_length(prefix_text_, text));

    const size_t last_read = read_offset_;
    read_offset_ = ids_.size();
    prefix_text_ = std::move(text);
    // Slide the window: the ids read before last_read are no longer needed,
    // as long as the new prefix makes text of its own.
    if (last_read > prefix_offset_ && last_read < read_offset_) {
        std::string tail = tok_.decode(all.subspan(last_read, read_offset_ - last_read));
        if (!tail.empty()) {
            prefix_offset_ = last_read;
            prefix_text_ = std::move(tail);
        }
    }
    return out;
}

}  // namespace minfer
