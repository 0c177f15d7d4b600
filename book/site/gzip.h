// gzip for the site's text answers (RFC 9110 Accept-Encoding, zlib's deflate
// in the gzip wrapper). /llms-full.txt is over a megabyte of Markdown; pages,
// their twins, scripts and JSON shrink to a fifth or so.
#pragma once

#include <string>
#include <string_view>

#include "server/http/http_server.h"

namespace minfer::book {

// Whether Accept-Encoding admits gzip (a "gzip" or "*" coding with q > 0;
// "gzip;q=0" refuses it).
bool accepts_gzip(const HttpRequest& request);

// Worth compressing: text, JSON, JavaScript, SVG, at least 1 KiB of it.
bool worth_gzip(std::string_view content_type, size_t bytes);

// `data` in the gzip format (compression level 6).
std::string gzip(std::string_view data);

}  // namespace minfer::book
