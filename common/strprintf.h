#pragma once
// printf-style formatting into a std::string (GCC 12 has no std::format).
#include <string>

namespace mygpt {

std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace mygpt
