#pragma once
// The fuzzer's bytes as a file: the parsers under test read paths. One folder per process, reused.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace mygpt::fuzz {

inline std::filesystem::path scratch_folder() {
  static const std::filesystem::path folder = [] {
    auto path = std::filesystem::temp_directory_path() / ("mygpt_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  return folder;
}

inline std::filesystem::path write_input(const std::string& name, const uint8_t* data, size_t size) {
  const auto path = scratch_folder() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  return path;
}

}  // namespace mygpt::fuzz
