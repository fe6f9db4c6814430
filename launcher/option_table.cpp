#include "launcher/option_table.h"

#include <cctype>

#include "common/file_io.h"

namespace mygpt {

void refuse_placeholder_text(const std::string& text, const std::string& where) {
  for (size_t open = text.find('%'); open != std::string::npos; open = text.find('%', open + 1)) {
    size_t end = open + 1;
    while (end < text.size() && (std::islower(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_')) ++end;
    if (end > open + 1 && end < text.size() && text[end] == '%') {
      throw std::invalid_argument(where + " holds '" + text.substr(open, end - open + 1) +
                                  "': %word% sequences are not accepted (the option parser reserves them)");
    }
  }
}

std::string read_config_file(const std::string& path) {
  // A config file is small; refusing large ones keeps a mistyped path (a dataset) from being read whole.
  return read_whole_file(path, "config file", std::size_t{1} << 20);
}

}  // namespace mygpt
