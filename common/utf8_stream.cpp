#include "common/utf8_stream.h"

#include <cstddef>

namespace mygpt {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The range the second byte of a sequence led by `lead` must fall in (Unicode table 3-7), which also
// rules out overlong forms, surrogates and code points above U+10FFFF; later bytes are 80..BF.
struct SequenceRule {
  int length;  // 0: the byte cannot start a sequence
  unsigned char second_lo, second_hi;
};

SequenceRule rule_for(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Appends the valid UTF-8 of bytes to out and returns how many bytes it consumed: all of them, except
// a well-formed but incomplete last character when keep_incomplete (then the caller keeps it).
std::size_t decode_into(std::string_view bytes, std::string& out, bool keep_incomplete) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    const SequenceRule rule = rule_for(lead);
    if (rule.length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    std::size_t n = 1;  // bytes of this sequence that are well-formed so far
    while (n < static_cast<std::size_t>(rule.length) && i + n < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i + n]);
      const bool ok = n == 1 ? (b >= rule.second_lo && b <= rule.second_hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++n;
    }
    if (n == static_cast<std::size_t>(rule.length)) {
      out.append(bytes.substr(i, n));
    } else if (i + n == bytes.size() && keep_incomplete) {
      return i;  // the rest of this character may still come
    } else {
      out += kReplacement;  // the maximal subpart; decoding resumes at the byte that broke it
    }
    i += n;
  }
  return i;
}

}  // namespace

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  pending_.erase(0, decode_into(pending_, out, /*keep_incomplete=*/true));
  return out;
}

std::string Utf8StreamDecoder::finish() {
  std::string out;
  decode_into(pending_, out, /*keep_incomplete=*/false);
  pending_.clear();
  return out;
}

}  // namespace mygpt
