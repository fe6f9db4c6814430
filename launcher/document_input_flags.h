#pragma once
// The options of the commands that read documents as prepare reads them (prepare, tokenizer train), each
// defined once here (launcher/shared_flags.h holds those of most commands).
#include <string>

#include "launcher/option_table.h"

namespace mygpt {

// The column of a Parquet input, or the member of a JSON-lines record, that holds the documents.
template <typename Config, typename... Path>
auto& text_column_flag(OptionTable<Config>& table, Path... path) {
  return table.add("text-column", path..., "the column of a Parquet input, or the member of a JSON-lines record, that holds the documents")
      .init(std::string("text"));
}

}  // namespace mygpt
