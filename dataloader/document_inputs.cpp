#include "dataloader/document_inputs.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace mygpt {
namespace {

std::vector<std::string> parquet_files_in(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    if (entry.path().extension() == ".parquet" && entry.is_regular_file(ec)) files.push_back(entry.path().string());
  }
  if (ec) throw std::invalid_argument("--input folder '" + folder + "' cannot be read: " + ec.message());
  if (files.empty()) throw std::invalid_argument("--input folder '" + folder + "' holds no .parquet files");
  std::sort(files.begin(), files.end());
  return files;
}

bool has_glob_characters(const std::string& text) { return text.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t found{};
  const std::unique_ptr<glob_t, void (*)(glob_t*)> release(&found, globfree);
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &found);  // sorted by name (no GLOB_NOSORT)
  if (rc == GLOB_NOMATCH) throw std::invalid_argument("--input '" + pattern + "' matches no file");
  if (rc != 0) throw std::invalid_argument("--input '" + pattern + "' cannot be searched");
  return {found.gl_pathv, found.gl_pathv + found.gl_pathc};
}

}  // namespace

DocumentInputs expand_document_inputs(const std::vector<std::string>& inputs) {
  DocumentInputs out;
  for (const auto& input : inputs) {
    std::error_code ec;
    std::vector<std::string> files;
    if (std::filesystem::is_directory(input, ec)) {
      files = parquet_files_in(input);
    } else if (!std::filesystem::exists(input, ec) && has_glob_characters(input)) {
      files = glob_matches(input);
    } else {
      out.files.push_back(input);  // a file, or a name DocumentReader refuses in its own words
      continue;
    }
    out.folder_contract = inputs.size() == 1;
    out.files.insert(out.files.end(), files.begin(), files.end());
  }
  return out;
}

}  // namespace mygpt
