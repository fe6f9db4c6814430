#pragma once
// Text out of token bytes. A byte-level tokenizer (GPT-2's BPE) can split one character's UTF-8 bytes
// over several tokens, and a sampled sequence need not be valid UTF-8 at all. What is printed is always
// valid UTF-8: bytes of a character not yet whole wait for the rest, and what never becomes whole is
// written as U+FFFD, one per maximal ill-formed subpart (Unicode's recommended practice, which Python's
// errors="replace" and so Hugging Face's and tiktoken's decoders follow).
#include <string>
#include <string_view>

namespace mygpt {

// Feed it the bytes of each token as they are produced; it returns the text that is whole so far.
class Utf8StreamDecoder {
 public:
  // The valid UTF-8 of everything pushed so far that has not been returned yet; a trailing incomplete
  // (but so far well-formed) character is kept back for the next push.
  std::string push(std::string_view bytes);
  // What is kept back, as U+FFFD: the stream ended in the middle of a character.
  std::string finish();

 private:
  std::string pending_;
};

// The whole of a text at once: with_invalid_utf8_replaced (common/file_io.h).

}  // namespace mygpt
