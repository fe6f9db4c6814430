#pragma once
// Resolves the data options of a training run into token streams and the tokenizer that goes into
// checkpoints. The data is builtin:sort, a UTF-8 text file (tokenized here), a token file (llm.c .bin,
// .npy uint16, raw uint16), a folder of shards or a glob; the kind comes from the file's content.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataloader/batch_loader.h"
#include "dataloader/chat_format.h"
#include "tokenizer/text_codec.h"
#include "dataloader/token_source.h"

namespace mygpt {

struct DataOptions {
  std::string data;
  std::optional<std::string> val_data;  // validation token data; a shard folder's *val* files otherwise
  TokenizerKind tokenizer{};            // of text data: character, gpt2 or hf
  std::optional<std::string> vocab;     // folder of GPT-2's encoder.json and vocab.bpe, or of a tokenizer.json
  std::optional<int64_t> vocab_size;    // of token data; unset: 50304, or the char_vocab.txt of shards
  double val_fraction{};                // share of a text kept for validation (its end)
  DataOrder data_order{};
  Packing packing{};  // rows, or best-fit documents (the train loader's; validation keeps rows)
  std::optional<std::string> hellaswag;  // HellaSwag file evaluated during training
  std::optional<std::string> core;       // CORE eval bundle folder evaluated during training
  // Supervised fine-tuning: data (and val_data) are conversations in JSON lines (dataloader/chat_data.h),
  // rendered by the chat format; validation is val_data's, else the last val_fraction of the conversations.
  bool sft{};
  bool skip_bad_records{};  // SFT: a bad record is skipped and counted instead of ending the run
};

// Conversations of a fine-tuning run, rendered whole (each run cuts them to its rows).
struct ChatData {
  std::shared_ptr<const std::vector<RenderedChat>> train;
  std::shared_ptr<const std::vector<RenderedChat>> val;  // null when none are held out
  std::string format_record;                              // ChatFormat::record(), for checkpoints
  int64_t ids_end = 0;                                     // one past the largest id (the chat tokens')
  int64_t pad_id = 0;                                      // what fills a row after its conversation
  std::string source;     // "conversations FILE"
  std::string tokenizer;  // "gpt2 tokenizer, chat template 'nanochat'"
  // The data line: the source, how many conversations train and are held out, the tokenizer. A run
  // gives the counts left once its rows cut them (TrainingData::description has those before).
  std::string describe(size_t train_count, size_t held_out) const;
};

struct TrainingData {
  std::shared_ptr<const TokenSource> train;  // null for conversations (then `chat` holds them)
  std::shared_ptr<const TokenSource> val;    // null when there is no validation data
  std::optional<ChatData> chat;              // DataOptions::sft
  int64_t vocab_size = 0;                  // the model's (padded) vocabulary
  TokenizerKind tokenizer_kind = TokenizerKind::none;
  std::string tokenizer_data;  // what make_text_codec needs to rebuild the tokenizer
  std::string description;     // one line for the log
  std::vector<std::string> notes;  // printed after it (records skipped, ...)
};

TrainingData load_training_data(const DataOptions& options);

// What `plan` needs of the data, without reading token files: the model's vocabulary as a run would
// get it, and the bytes a run keeps resident (text: its token ids; token data: the mapped files).
// Text is loaded (its alphabet is the vocabulary); token files are only listed.
struct DataFootprint {
  int64_t vocab_size = 0;
  int64_t resident_bytes = 0;
  bool loaded = false;  // text: read and tokenized by data_footprint, so resident in this process now
  std::string description;
};
DataFootprint data_footprint(const DataOptions& options);

// Whether load_training_data reads `spec` as token data (a token file, a folder of shards, a glob)
// rather than as text (builtin:..., a UTF-8 text file). Detects by content, as loading does.
bool is_token_data(const std::string& spec);

}  // namespace mygpt
