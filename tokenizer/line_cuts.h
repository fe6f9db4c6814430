#pragma once
// The places at line ends where a long text may be cut into pieces that a byte-level BPE tokenizes apart
// with the ids of the whole (prepare's and tokenizer train's pieces): a line end between two visible
// characters. Which of them a tokenizer allows follows from its split pattern (proven_line_pattern) and
// what comes before it (HfBpeTokenizer::restarts_at); GPT-2's tokenizer and the character one take
// restarts_between_printable_lines (text_codec.h).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mygpt {

// The place a pattern proves at a CRLF line end "x\r\ny". GPT-2's \s+(?!\S) takes "\r" and "\n" apart before
// a visible y, but "\r\n" whole at a text's end: the cut goes between them. Llama 3's, Qwen2's, GPT-4's and
// nanochat's take "\r\n" whole (\s*[\r\n]+, \s*[\r\n], a punctuation run's [\r\n]*), at a text's end too:
// the cut goes after it.
enum class CrlfCut { after_cr, after_lf };

// What a cut at `cut` of `text` is, by the characters around it (x and y visible: visible_character_at).
enum class LineCut {
  none,
  tight,          // "x\n|y"
  spaced,         // "x\n| y"
  crlf_after_cr,  // "x\r|\ny"
  crlf_after_lf,  // "x\r\n|y"
};
LineCut line_cut_at(std::string_view text, std::size_t cut);

// The bytes of the visible character that starts at text[at] (0: none there, or cut short by the text's end).
// Visible: printable ASCII other than space, or a letter, number, punctuation or symbol (Unicode's L, N, P, S)
// whose compatibility decomposition holds no space or control (so that NFKC does not make it whitespace:
// U+00A8 becomes " \u0308"). No regular expression's \s matches one, in any engine's Unicode: their
// whitespace is Z and Cc.
std::size_t visible_character_at(std::string_view text, std::size_t at);
// The same for the character that ends right before text[end].
std::size_t visible_character_before(std::string_view text, std::size_t end);

// The CRLF cut a Split pattern (spelled as tokenizer.json or `tokenizer train --pattern` spells it) proves,
// where the pattern is proven to restart at the tight and spaced LF cuts too; none for any other pattern.
std::optional<CrlfCut> proven_line_pattern(const std::string& pattern);

// Whether a pattern alone (no prefix space, no added tokens: `tokenizer train`'s chunks) restarts at `cut`.
bool pattern_restarts_at(CrlfCut crlf, std::string_view text, std::size_t cut);

}  // namespace mygpt
