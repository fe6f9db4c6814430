#pragma once
// GPT-2's tokenizer as a Hugging Face folder keeps it, for `export`: vocab.json and merges.txt (the same
// bytes as OpenAI's encoder.json and vocab.bpe), tokenizer_config.json and special_tokens_map.json.
#include <cstdint>
#include <filesystem>

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

}  // namespace mygpt
