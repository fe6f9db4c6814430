#include "tokenizer/unicode_normalization.h"

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <utf8proc.h>

namespace mygpt {
namespace {

constexpr char32_t kAssignedInUnicode9[] = {
#include "tokenizer/unicode_9_assigned.inc"
};
static_assert(std::size(kAssignedInUnicode9) % 2 == 0, "an inversion list of ranges has an even length");

// utf8proc_NFC's (or NFKC's) flags, with a length so that a NUL character is text.
void append_normalized(std::string_view piece, NormalForm form, std::string& out) {
  if (piece.empty()) return;
  utf8proc_uint8_t* mapped = nullptr;
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE |
                                                      (form == NormalForm::nfkc ? UTF8PROC_COMPAT : 0));
  const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(piece.data()),
                                               static_cast<utf8proc_ssize_t>(piece.size()), &mapped, options);
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  if (length < 0) throw std::invalid_argument(utf8proc_errmsg(length));
  out.append(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
}

}  // namespace

bool assigned_in_unicode_9(char32_t code_point) {
  if (code_point < kAssignedInUnicode9[1]) return true;  // U+0000..U+0377, the common case, without a search
  // The number of list entries <= code_point is odd exactly inside an assigned range.
  const auto after = std::upper_bound(std::begin(kAssignedInUnicode9), std::end(kAssignedInUnicode9), code_point);
  return (after - std::begin(kAssignedInUnicode9)) % 2 == 1;
}

std::string normalized_as_tokenizers(std::string_view text, NormalForm form) {
  std::string out;
  out.reserve(text.size());
  std::size_t piece_start = 0, at = 0;
  while (at < text.size()) {
    utf8proc_int32_t code_point = 0;
    const utf8proc_ssize_t length =
        utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + at),
                         static_cast<utf8proc_ssize_t>(text.size() - at), &code_point);
    if (length < 0) throw std::invalid_argument(utf8proc_errmsg(length));
    const auto width = static_cast<std::size_t>(length);
    if (!assigned_in_unicode_9(static_cast<char32_t>(code_point))) {
      append_normalized(text.substr(piece_start, at - piece_start), form, out);
      out.append(text.substr(at, width));  // the wall, as it is
      piece_start = at + width;
    }
    at += width;
  }
  append_normalized(text.substr(piece_start), form, out);
  return out;
}

}  // namespace mygpt
