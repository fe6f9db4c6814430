#pragma once
// A reply's text as its ids come: whole UTF-8 characters only (common/utf8_stream.h), and where the
// request named stop strings, the text ends before the first of them to appear. Text that might be the
// start of a stop string is held back until the next ids settle it, so a streamed reply never shows part
// of a stop string and then takes it back.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/utf8_stream.h"

namespace mygpt {

class ReplyText {
 public:
  // decode: one id's bytes (a TextCodec's decode of {id}). stops: non-empty strings.
  ReplyText(std::function<std::string(int64_t)> decode, std::vector<std::string> stops);

  // The text that can be shown after one more id (may be empty). Once stopped(), nothing more.
  std::string push(int64_t id);
  // The reply ended: what was held back (an unfinished character as U+FFFD).
  std::string finish();
  // A stop string appeared: the reply ends before it.
  bool stopped() const { return stopped_; }

 private:
  // Moves what is settled from held_ to the returned text; with `end`, everything.
  std::string settle(bool end);

  std::function<std::string(int64_t)> decode_;
  std::vector<std::string> stops_;
  Utf8StreamDecoder utf8_;
  std::string held_;  // whole characters not shown yet: they may begin a stop string
  bool stopped_ = false;
};

}  // namespace mygpt
