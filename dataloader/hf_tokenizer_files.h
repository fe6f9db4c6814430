#pragma once
// Tokenizer files as a Hugging Face folder keeps them, for `export` and for reading a folder back:
// GPT-2's vocab.json and merges.txt (the same bytes as OpenAI's encoder.json and vocab.bpe),
// tokenizer_config.json and special_tokens_map.json; and a chat model's template and tokens in them.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dataloader/chat_format.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"

namespace mygpt {

// transformers' GPT-2 tokenizer settings: <|endoftext|> is bos, eos and unk; no prefix space. A chat
// model's (chat non-null) five tokens are added special tokens at our ids, <|bos|> is bos and
// <|assistant_end|> eos (generation stops at the end of a reply), and tokenizer_config.json's
// "chat_template" is ChatFormat::jinja_template(), so apply_chat_template gives the ids we train on.
// context: the model's block size (model_max_length). Files are written atomically.
void write_hf_gpt2_tokenizer(const std::filesystem::path& folder, const Gpt2TokenizerFiles& from, int64_t context,
                             const ChatFormat* chat);

// A tokenizer.json folder already written into `folder` made a chat model's: the five tokens join
// tokenizer.json's added tokens where the tokenizer lacks them (AutoTokenizer reads that file first),
// and tokenizer_config.json gets them, the chat template, <|bos|> as bos and <|assistant_end|> as eos.
void add_chat_to_hf_tokenizer(const std::filesystem::path& folder, const ChatFormat& chat);

// The chat format record (ChatFormat::record()) of a model folder whose tokenizer_config.json has our
// chat template, with the five tokens' ids from its added tokens (tokenizer_config.json's
// added_tokens_decoder, else tokenizer.json's added_tokens): an exported chat model read back. nullopt
// for a folder without a chat template or with another one. Our template without the five ids, or a
// malformed file, is std::invalid_argument naming the file.
std::optional<std::string> read_hf_chat_record(const std::filesystem::path& folder);

}  // namespace mygpt
