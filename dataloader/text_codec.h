#pragma once
// One face for both tokenizers, as commands and checkpoints need it: a kind ("char" or "gpt2") and
// the data that rebuilds it (the character vocabulary, or the directory of GPT-2's vocabulary files).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mygpt {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;     // ids are below this (before padding)
  virtual int64_t end_of_text() const = 0;    // -1 when the tokenizer has none
  virtual std::string kind() const = 0;       // "char" or "gpt2"
  virtual std::string data() const = 0;       // what make_text_codec needs to rebuild it
};

// Throws std::invalid_argument for an unknown kind or unusable data (e.g. missing vocabulary files).
std::unique_ptr<TextCodec> make_text_codec(const std::string& kind, const std::string& data);
// A character tokenizer over the characters of text.
std::unique_ptr<TextCodec> make_char_codec_for(std::string_view text);

}  // namespace mygpt
