// Where an HfBpeTokenizer may restart encoding a long document (restarts_at), derived from its own
// definition: the pre-tokenizer's steps decide which line cuts are proven, the added tokens near a cut
// veto it.
#include <algorithm>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/hf_bpe_tokenizer_impl.h"

namespace mygpt {

using hf_bpe::AddedToken;
using hf_bpe::PretokenStep;
using hf_bpe::StepAtCut;

namespace hf_bpe {

// Split patterns (as tokenizer.json spells them) proven to restart at "x\n|y" and "x\n| y" (x, y printable
// ASCII, not space), with the whole of y in the piece: the match holding x ends before the '\n' (letters,
// digits) or takes it and stops at y (punctuation runs with [\r\n]*, never more since y is neither '\r' nor
// '\n'); a match starting at the '\n' is that '\n' alone (no alternative lets '\n' lead letters or
// punctuation; \s*[\r\n]+ and \s*[\r\n] backtrack to it; GPT-2's \s+(?!\S) and \s+ give "\n" before y or
// " y" and at a text's end alike); none looks behind. So the text before the cut ends with the same pieces as
// alone, and the scan goes on from the cut. GPT-4o's pattern is not here: its [\r\n/]* joins ".\n/".
bool restarts_at_lines(const std::string& pattern) {
  static const std::vector<std::string> proven = {
      // GPT-2's (ByteLevel's use_regex, and as a Split)
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      // Llama 3's
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      // Qwen2's and Qwen3's
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      // GPT-4's (cl100k) and nanochat's
      R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
      R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
  };
  return std::find(proven.begin(), proven.end(), pattern) != proven.end();
}

}  // namespace hf_bpe

// The pre-tokenizer's steps up to the first that splits at a cut (after it every step sees the two sides
// apart, in the whole text as in the pieces). Before it, a prefix space would give the piece at a cut a
// space it lacks in the whole text unless it starts with one ("x\n| y"); Digits may end the piece at the cut
// right after a space before a digit, where GPT-2's \s+(?!\S) would then take "\n " whole, so the spaced
// cut needs no Digits before; Digits keep "x\n|y" (they split only at digits, which the patterns split at
// too). Any other step before it: no cut is proven.
void HfBpeTokenizer::Impl::decide_cuts() {
  bool prefix_space = false, digits = false;
  for (const PretokenStep& step : steps) {
    if (step.at_cut == StepAtCut::splits_there) {
      tight_cuts = !prefix_space;
      spaced_cuts = !digits;
      return;
    }
    if (step.at_cut == StepAtCut::unknown) return;
    (step.at_cut == StepAtCut::prefix_space ? prefix_space : digits) = true;
  }
}

// Whether an added token may take part in tokenizing the cut: one overlapping the two characters on each
// side (a token across the cut, a single_word token that sees its neighbour, an lstrip/rstrip token that
// takes the '\n'). Tokens matched after the normalizer are looked for in the normalized text around the cut,
// normalized in two halves (a cut before an ASCII character is a boundary of NFC and NFKC: no ASCII
// character composes with what precedes it), from and to an ASCII character far enough away that the
// normalized text covers the longest token on each side; then no token matched on the raw text may lie
// in that stretch, as tokenizers normalizes the text between those apart.
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
    const std::size_t from = cut > 3 ? cut - 3 : 0;
    return overlaps(raw_added, text, from, cut + 3) || overlaps(normalized_added, text, from, cut + 3);
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
  return overlaps(normalized_added, joined, left.size() > 3 ? left.size() - 3 : 0, left.size() + 3);
}

bool HfBpeTokenizer::restarts_at(std::string_view text, std::size_t cut) const {
  const auto printable = [&](std::size_t at) { return at < text.size() && text[at] > ' ' && text[at] < 0x7f; };
  if (cut < 2 || text[cut - 1] != '\n' || !printable(cut - 2)) return false;
  const bool spaced = cut < text.size() && text[cut] == ' ';
  if (spaced ? !(impl_->spaced_cuts && printable(cut + 1)) : !(impl_->tight_cuts && printable(cut))) return false;
  return !impl_->added_token_near(text, cut);
}

}  // namespace mygpt
