#pragma once
#include <string>

namespace minfer {
// Version, backends and libraries compiled in, one per line.
std::string build_info();
}  // namespace minfer
