#include "book/site/gzip.h"

#include <zlib.h>

#include <cstdlib>
#include <stdexcept>

#include "book/site/http_util.h"

namespace minfer::book {

bool accepts_gzip(const HttpRequest& request) {
    const auto it = request.find(http::field::accept_encoding);
    if (it == request.end()) return false;
    double gzip_q = -1, any_q = -1;
    std::string_view list = it->value();
    while (!list.empty()) {
        const size_t comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        const size_t semi = item.find(';');
        std::string coding = ascii_lower(item.substr(0, semi));
        coding.erase(0, coding.find_first_not_of(" \t"));
        coding.erase(coding.find_last_not_of(" \t") + 1);
        double q = 1;
        if (semi != std::string_view::npos) {
            const std::string params = ascii_lower(item.substr(semi + 1));
            if (const size_t at = params.find("q="); at != std::string::npos) q = std::strtod(params.c_str() + at + 2, nullptr);
        }
        if (coding == "gzip" || coding == "x-gzip") gzip_q = q;
        else if (coding == "*") any_q = q;
    }
    return gzip_q >= 0 ? gzip_q > 0 : any_q > 0;
}

bool worth_gzip(std::string_view content_type, size_t bytes) {
    const bool text = content_type.starts_with("text/") || content_type.find("json") != std::string_view::npos ||
                      content_type.find("javascript") != std::string_view::npos ||
                      content_type.find("svg") != std::string_view::npos;
    return text && bytes >= 1024;
}

std::string gzip(std::string_view data) {
    z_stream z{};
    // 15 + 16: the largest window, in the gzip wrapper (not zlib's).
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("gzip: deflateInit2 failed");
    std::string out(deflateBound(&z, uLong(data.size())), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = uInt(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = uInt(out.size());
    const int rc = deflate(&z, Z_FINISH);
    const size_t written = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw std::runtime_error("gzip: deflate failed");
    out.resize(written);
    return out;
}

}  // namespace minfer::book
