// safetensors files (model/hf/safetensors_file.h): the header, every dtype, shape and offset are checked
// against the bytes before any read; then every tensor is read. Bad files must be std::invalid_argument.
#include <stdexcept>
#include <string>

#include "model/hf/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto reader =
        mygpt::SafetensorsReader::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    for (const auto& name : reader.names()) {
      const auto tensor = reader.tensor(name);
      const auto& info = reader.info(name);
      if (static_cast<uint64_t>(tensor.numel()) * tensor.element_size() != info.end - info.begin) __builtin_trap();
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
