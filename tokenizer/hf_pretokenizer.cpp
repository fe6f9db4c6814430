// The pre-tokenizer of an HfBpeTokenizer: its steps (Split, Digits, ByteLevel's prefix space and regex) split
// the text between added tokens into pieces, as tokenizers does, and each piece is merged by the BPE.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/hf_bpe_tokenizer_impl.h"

namespace mygpt {
namespace hf_bpe {

// The code point starting at text[i] and its length; an invalid byte is itself (length 1).
std::pair<char32_t, std::size_t> code_point_at(std::string_view text, std::size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const std::size_t length = lead < 0x80           ? 1
                             : (lead >> 5) == 0x6  ? 2
                             : (lead >> 4) == 0xE  ? 3
                             : (lead >> 3) == 0x1E ? 4
                                                   : 1;
  if (length == 1 || i + length > text.size()) return {lead, 1};
  char32_t cp = lead & (0x7F >> length);
  for (std::size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return {lead, 1};
    cp = (cp << 6) | (next & 0x3F);
  }
  return {cp, length};
}

}  // namespace hf_bpe

using hf_bpe::code_point_at;
using hf_bpe::SplitBehavior;

// tokenizers' Pattern::find_matches and SplitDelimiterBehavior on one piece.
void HfBpeTokenizer::Impl::split(PretokenStep& step, const std::string& piece, std::vector<std::string>& out) {
  if (!step.pattern) {  // ByteLevel's add_prefix_space
    out.push_back(piece.starts_with(' ') ? piece : " " + piece);
    return;
  }
  struct Part {
    std::size_t begin, end;
    bool match;
  };
  std::vector<Part> parts;
  std::size_t previous = 0;
  for (std::size_t offset = 0; offset <= piece.size();) {
    const auto match = step.pattern->next(piece, offset);
    if (!match) break;
    const auto [begin, end] = *match;
    if (begin > previous) parts.push_back({previous, begin, step.invert});
    parts.push_back({begin, end, !step.invert});
    previous = end;
    offset = end > begin ? end : end + code_point_at(piece + '\0', end).second;  // past an empty match
  }
  if (previous < piece.size()) parts.push_back({previous, piece.size(), step.invert});

  std::vector<Part> kept;
  bool previous_match = false;
  switch (step.behavior) {
    case SplitBehavior::removed:
      for (const Part& p : parts) {
        if (!p.match) kept.push_back(p);
      }
      break;
    case SplitBehavior::isolated:
      kept = std::move(parts);  // not read again; a copy here trips GCC 12's -Wfree-nonheap-object
      break;
    case SplitBehavior::merged_with_previous:
      for (const Part& p : parts) {
        if (p.match && !previous_match && !kept.empty()) {
          kept.back().end = p.end;
        } else {
          kept.push_back(p);
        }
        previous_match = p.match;
      }
      break;
    case SplitBehavior::merged_with_next:
      for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
        if (p->match && !previous_match && !kept.empty()) {
          kept.back().begin = p->begin;
        } else {
          kept.push_back(*p);
        }
        previous_match = p->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case SplitBehavior::contiguous:
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0 && parts[i].match == previous_match) {
          kept.back().end = parts[i].end;
        } else {
          kept.push_back(parts[i]);
        }
        previous_match = parts[i].match;
      }
      break;
  }
  for (const Part& p : kept) {
    if (p.end > p.begin) out.push_back(piece.substr(p.begin, p.end - p.begin));
  }
}

void HfBpeTokenizer::Impl::encode_pretokenized(std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::vector<std::string> pieces{std::string(text)}, next;
  for (PretokenStep& step : steps) {
    next.clear();
    for (const std::string& piece : pieces) split(step, piece, next);
    pieces.swap(next);
  }
  for (const std::string& piece : pieces) {
    if (ignore_merges) {
      if (const auto it = id_of_bytes.find(piece); it != id_of_bytes.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    words->encode(piece, out);
  }
}

}  // namespace mygpt
