// common/utf8_stream.h: streamed token bytes become valid UTF-8, characters split over tokens wait for
// their rest, and ill-formed bytes become U+FFFD exactly as Python's errors="replace" decodes them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/utf8_stream.h"

namespace mygpt::utf8_stream_test {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string pushed_in_pieces(const std::vector<std::string>& pieces, std::vector<std::string>* outputs = nullptr) {
  Utf8StreamDecoder decoder;
  std::string text;
  for (const auto& piece : pieces) {
    const std::string out = decoder.push(piece);
    if (outputs) outputs->push_back(out);
    text += out;
  }
  return text + decoder.finish();
}

TEST(Utf8Stream, SplitCharactersWaitForTheirRest) {
  std::vector<std::string> outputs;
  // "é" (C3 A9) and "😀" (F0 9F 98 80) split across pushes, as byte-level BPE tokens split them.
  EXPECT_EQ(pushed_in_pieces({"caf\xC3", "\xA9 ", "\xF0\x9F", "\x98", "\x80!"}, &outputs), "caf\xC3\xA9 \xF0\x9F\x98\x80!");
  EXPECT_EQ(outputs, (std::vector<std::string>{"caf", "\xC3\xA9 ", "", "", "\xF0\x9F\x98\x80!"}));
}

TEST(Utf8Stream, WhatNeverBecomesWholeIsReplacementCharacters) {
  // Expected values are Python's bytes.decode("utf-8", "replace").
  EXPECT_EQ(with_invalid_utf8_replaced("\xE2\x82" "A"), kFffd + "A");               // one maximal subpart, then ASCII
  EXPECT_EQ(with_invalid_utf8_replaced("\xED\xA0\x80"), kFffd + kFffd + kFffd);      // a surrogate
  EXPECT_EQ(with_invalid_utf8_replaced("\xC0\xAF"), kFffd + kFffd);                  // overlong
  EXPECT_EQ(with_invalid_utf8_replaced("\xE0\x80\x80"), kFffd + kFffd + kFffd);      // overlong
  EXPECT_EQ(with_invalid_utf8_replaced("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(with_invalid_utf8_replaced("a\xFF" "b"), "a" + kFffd + "b");
  EXPECT_EQ(with_invalid_utf8_replaced("\xF0\x9F\x98"), kFffd);                      // cut short at the end
  EXPECT_EQ(with_invalid_utf8_replaced("plain \xE2\x82\xAC"), "plain \xE2\x82\xAC");
  // A stream that ends mid-character, and one whose next byte breaks the character.
  EXPECT_EQ(pushed_in_pieces({"x\xF0\x9F"}), "x" + kFffd);
  EXPECT_EQ(pushed_in_pieces({"\xE2\x82", "z"}), kFffd + "z");
}

}  // namespace
}  // namespace mygpt::utf8_stream_test
