#pragma once
// The files of `prepare --input`: files as given; a folder's .parquet files (other files that prepare
// would read as documents are refused), sorted by name; a quoted
// glob's matches, sorted by name. A folder or glob of Parquet files given alone follows nanochat's
// contract: its last file (by name) is the validation data.
#include <string>
#include <vector>

namespace mygpt {

struct DocumentInputs {
  std::vector<std::string> files;
  // One folder or glob was given: its last file is validation, unless the caller decides otherwise.
  bool folder_contract = false;
};

// Throws std::invalid_argument naming the --input: a folder without .parquet files, or with documents of
// another kind beside them (.jsonl, .json, .txt: read by prepare, so not passed over in silence), a glob
// matching nothing.
DocumentInputs expand_document_inputs(const std::vector<std::string>& inputs);

}  // namespace mygpt
