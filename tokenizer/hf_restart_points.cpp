// Where an HfBpeTokenizer may restart encoding a long document (restarts_at), derived from its own
// definition: the pre-tokenizer's steps decide which line cuts are proven (tokenizer/line_cuts.h proves the
// patterns), the added tokens near a cut veto it.
#include <string>

#include "common/file_io.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/hf_bpe_tokenizer_impl.h"

namespace mygpt {

using hf_bpe::AddedToken;
using hf_bpe::PretokenStep;
using hf_bpe::StepAtCut;

// The pre-tokenizer's steps up to the first that splits at a cut (after it every step sees the two sides
// apart, in the whole text as in the pieces). Before it, a prefix space would give the piece at a cut a
// space it lacks in the whole text unless it starts with one ("x\n| y"); Digits may end the piece at the cut
// right after a space before a digit, where GPT-2's \s+(?!\S) would then take "\n " whole, so the spaced
// cut needs no Digits before, nor does GPT-2's CRLF cut "x\r|\ny" (before a digit the '\n' would end a piece
// of Digits, and "\r\n" at its end is one match); Digits keep "x\n|y" and "x\r\n|y" (they split only at
// digits, which the patterns split at too). Any other step before it: no cut is proven.
void HfBpeTokenizer::Impl::decide_cuts() {
  bool prefix_space = false, digits = false;
  for (const PretokenStep& step : steps) {
    if (step.at_cut == StepAtCut::splits_there) {
      tight_cuts = !prefix_space;
      spaced_cuts = !digits;
      crlf_cut = step.crlf;
      return;
    }
    if (step.at_cut == StepAtCut::unknown) return;
    (step.at_cut == StepAtCut::prefix_space ? prefix_space : digits) = true;
  }
}

// Whether an added token may take part in tokenizing the cut: one overlapping the four bytes on each side
// (the line end and a byte of x and y: a token across the cut, a single_word token that sees its neighbour,
// an lstrip/rstrip token that takes the line end). Tokens matched after the normalizer are looked for in the
// normalized text around the cut, normalized in two halves (a cut right after a '\n' or right before one is
// a boundary of NFC and NFKC: '\r' and '\n' compose with nothing, before or after), from and to an ASCII
// character far enough away that the normalized text covers the longest token on each side (no ASCII
// character composes with what precedes it); then no token matched on the raw text may lie in that
// stretch, as tokenizers normalizes the text between those apart.
bool HfBpeTokenizer::Impl::added_token_near(std::string_view text, std::size_t cut) const {
  const auto overlaps = [](const std::vector<AddedToken>& tokens, std::string_view in, std::size_t from,
                           std::size_t to) {
    for (const AddedToken& token : tokens) {
      const std::size_t n = token.content.size();
      const std::size_t first = from + 1 > n ? from + 1 - n : 0;  // starts from here end after `from`
      const std::size_t at = in.find(token.content, first);
      if (at != std::string_view::npos && at < to) return true;
    }
    return false;
  };
  const bool normalizes = !normalizer.empty() && !normalized_added.empty();
  if (!normalizes) {
    const std::size_t from = cut > 4 ? cut - 4 : 0;
    return overlaps(raw_added, text, from, cut + 4) || overlaps(normalized_added, text, from, cut + 4);
  }
  const std::size_t reach = 4 * (longest_added + 3) + 16;  // NFC/NFKC shrink text by at most 3 times
  std::size_t lo = cut > reach ? cut - reach : 0, hi = cut + reach;
  while (lo > 0 && static_cast<unsigned char>(text[lo]) >= 0x80) --lo;
  while (hi < text.size() && static_cast<unsigned char>(text[hi]) >= 0x80) ++hi;
  if (hi >= text.size()) return true;  // not enough text after the cut to decide
  if (overlaps(raw_added, text, lo, hi)) return true;
  const std::string_view before = text.substr(lo, cut - lo), after = text.substr(cut, hi - cut);
  if (first_invalid_utf8(before) || first_invalid_utf8(after)) return true;
  const std::string left = normalized(before), joined = left + normalized(after);
  return overlaps(normalized_added, joined, left.size() > 4 ? left.size() - 4 : 0, left.size() + 4);
}

// The line cuts (tokenizer/line_cuts.h) between visible characters, ASCII or not: "x\n|y" and the CRLF cut of
// the splitting pattern where nothing before it adds a space; "x\n| y" where no Digits come before it; GPT-2's
// CRLF cut "x\r|\ny" needs both. No added token near the cut.
bool HfBpeTokenizer::restarts_at(std::string_view text, std::size_t cut) const {
  bool proven = false;
  switch (line_cut_at(text, cut)) {
    case LineCut::tight:
      proven = impl_->tight_cuts;
      break;
    case LineCut::spaced:
      proven = impl_->spaced_cuts;
      break;
    case LineCut::crlf_after_cr:
      proven = impl_->crlf_cut == CrlfCut::after_cr && impl_->tight_cuts && impl_->spaced_cuts;
      break;
    case LineCut::crlf_after_lf:
      proven = impl_->crlf_cut == CrlfCut::after_lf && impl_->tight_cuts;
      break;
    case LineCut::none:
      break;
  }
  return proven && !impl_->added_token_near(text, cut);
}

}  // namespace mygpt
