#include "launcher/option_table.h"

#include "common/file_io.h"

namespace mygpt {

std::string read_config_file(const std::string& path) {
  // A config file is small; refusing large ones keeps a mistyped path (a dataset) from being read whole.
  return read_whole_file(path, "config file", std::size_t{1} << 20);
}

}  // namespace mygpt
