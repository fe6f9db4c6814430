#pragma once
// What `eval --val DATA` scores, told from DATA itself: token files (a file, a glob, or a shard folder's *val*
// files, as training validates on them), a UTF-8 text encoded with the model's tokenizer (its held-out end,
// cut as train's --val-fraction cuts it), or JSON lines of conversations (held out whole, for a chat model).
// train reads its validation data through its own run (dataloader/training_data.h); these are eval's.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dataloader/token_source.h"
#include "tokenizer/text_codec.h"

namespace mygpt {

// A regular file that is no token file (by its header and size): a text.
bool is_text_file(const std::string& spec);
// Whether a text file's first record is a conversation (dataloader/chat_data.h's shapes).
bool holds_conversations(const std::string& path);
// The token files of a --val spec; a folder is scored by its *val* files only (std::invalid_argument when it
// holds none).
std::vector<std::filesystem::path> validation_files(const std::string& spec);
// The tokens of a UTF-8 text with the model's tokenizer: the whole text (val_fraction 1), or its last
// val_fraction, cut at the token where train's --val-fraction cuts it. One-line std::invalid_argument for an
// empty text or a fraction of 0.
std::shared_ptr<const TokenSource> validation_text_tokens(const std::string& path, const TextCodec& codec,
                                                          double val_fraction);

}  // namespace mygpt
