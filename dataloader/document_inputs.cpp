#include "dataloader/document_inputs.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace mygpt {
namespace {

// A folder gives its .parquet files (nanochat's shard folder). Documents of the other kinds prepare reads
// (.jsonl, .json, .txt) beside them are not skipped in silence: the folder is refused, naming them.
std::vector<std::string> parquet_files_in(const std::string& folder) {
  std::vector<std::string> files, other_documents;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string extension = entry.path().extension().string();
    if (extension == ".parquet") files.push_back(entry.path().string());
    if (extension == ".jsonl" || extension == ".json" || extension == ".txt") {
      other_documents.push_back(entry.path().filename().string());
    }
  }
  if (ec) throw std::invalid_argument("--input folder '" + folder + "' cannot be read: " + ec.message());
  std::sort(files.begin(), files.end());
  std::sort(other_documents.begin(), other_documents.end());
  std::string others;
  for (std::size_t i = 0; i < other_documents.size() && i < 3; ++i) others += (i ? ", " : "") + other_documents[i];
  if (other_documents.size() > 3) others += " and " + std::to_string(other_documents.size() - 3) + " more";
  if (files.empty()) {
    throw std::invalid_argument("--input folder '" + folder + "' holds no .parquet files" +
                                (others.empty() ? std::string()
                                                : " (a folder gives its .parquet files; it holds " + others +
                                                      ": give those files as --input, or a quoted glob of them)"));
  }
  if (!others.empty()) {
    throw std::invalid_argument("--input folder '" + folder + "' holds " + std::to_string(files.size()) +
                                " .parquet file(s) and other documents (" + others +
                                "), and a folder gives its .parquet files alone: move the others out, or give every "
                                "file as --input");
  }
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
