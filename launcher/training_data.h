#pragma once
// Resolves `train --data SPEC [--val-data SPEC]` into token streams and the tokenizer that goes into
// checkpoints. SPEC is builtin:sort, a UTF-8 text file (tokenized here), a token file (llm.c .bin,
// .npy uint16, raw uint16), a directory of shards or a glob; the kind comes from the file's content.
#include <memory>
#include <string>

#include "dataloader/token_source.h"
#include "launcher/cli.h"

namespace mygpt {

struct TrainingData {
  std::shared_ptr<const TokenSource> train;
  std::shared_ptr<const TokenSource> val;  // null when there is no validation data
  int64_t vocab_size = 0;                  // the model's (padded) vocabulary
  std::string tokenizer_kind;              // "char", "gpt2", or "none" (token data without --vocab)
  std::string tokenizer_data;
  std::string description;                 // one line for the log
};

TrainingData load_training_data(const po::variables_map& values);

}  // namespace mygpt
