#pragma once
// The Python beside LibTorch (CMake's MYGPT_TORCH_PYTHON) that tests compare against: PyTorch (and, for
// some tests, transformers) on the same torch build. A script's answer is the JSON of its last stdout line.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <string>
#include <vector>

#include "common/file_io.h"

#ifndef MYGPT_TORCH_PYTHON
#define MYGPT_TORCH_PYTHON ""
#endif

namespace mygpt::testing {

inline std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The build's Python; the environment variable MYGPT_TORCH_PYTHON overrides it.
inline std::string reference_python() {
  const char* override = std::getenv("MYGPT_TORCH_PYTHON");
  return override != nullptr ? override : MYGPT_TORCH_PYTHON;
}

// Whether that Python imports these modules ("torch", "transformers, safetensors").
inline bool python_imports(const std::string& modules) {
  if (reference_python().empty()) return false;
  const std::string command =
      shell_quote(reference_python()) + " -c " + shell_quote("import " + modules) + " >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// Runs `python script args...` and returns the JSON of its last output line (null after a failure, which
// is reported with the script's stderr, kept in scratch).
inline nlohmann::json run_python_json(const std::string& script, const std::vector<std::string>& args,
                                      const std::filesystem::path& scratch) {
  std::string command = shell_quote(reference_python()) + ' ' + shell_quote(script);
  for (const auto& arg : args) command += ' ' + shell_quote(arg);
  const std::filesystem::path errors = scratch / "python.stderr";
  command += " 2>" + shell_quote(errors.string());
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return nullptr;
  }
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  if (::pclose(pipe) != 0 || output.empty()) {
    ADD_FAILURE() << command << " failed:\n" << read_whole_file(errors, "stderr");
    return nullptr;
  }
  const auto last_line = output.substr(output.rfind('\n', output.size() - 2) + 1);
  return nlohmann::json::parse(last_line);
}

// A (rows, columns) tensor of token ids as the reference scripts' --tokens argument: "1,2,3;4,5,6".
inline std::string tokens_argument(const torch::Tensor& tokens) {
  std::string out;
  for (int64_t row = 0; row < tokens.size(0); ++row) {
    for (int64_t col = 0; col < tokens.size(1); ++col) {
      if (col > 0 || row > 0) out += col > 0 ? ',' : ';';
      out += std::to_string(tokens[row][col].item<int64_t>());
    }
  }
  return out;
}

}  // namespace mygpt::testing
