#include "tokenizer/line_cuts.h"

#include <utf8proc.h>

#include <algorithm>
#include <vector>

namespace mygpt {
namespace {

bool visible(utf8proc_int32_t cp) {
  if (cp < 0x80) return cp > ' ' && cp < 0x7f;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO: case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK: case UTF8PROC_CATEGORY_SO:
      break;
    default:
      return false;
  }
  utf8proc_int32_t decomposed[32];
  int boundclass = 0;
  const auto compat = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  const utf8proc_ssize_t n = utf8proc_decompose_char(cp, decomposed, 32, compat, &boundclass);
  if (n < 0 || n > 32) return false;
  return std::none_of(decomposed, decomposed + n, [](utf8proc_int32_t c) {
    const auto category = utf8proc_category(c);
    return c < 0x21 || category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
           category == UTF8PROC_CATEGORY_ZP || category == UTF8PROC_CATEGORY_CC;
  });
}

}  // namespace

std::size_t visible_character_at(std::string_view text, std::size_t at) {
  if (at >= text.size()) return 0;
  utf8proc_int32_t cp = -1;
  const auto length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + at),
                                       static_cast<utf8proc_ssize_t>(text.size() - at), &cp);
  return length > 0 && visible(cp) ? static_cast<std::size_t>(length) : 0;
}

std::size_t visible_character_before(std::string_view text, std::size_t end) {
  std::size_t start = end;
  // Back over continuation bytes to the lead byte (at most 3 of them in UTF-8).
  while (start > 0 && end - start < 4) {
    --start;
    if ((static_cast<unsigned char>(text[start]) & 0xC0) != 0x80) break;
  }
  if (start == end) return 0;
  const std::size_t length = visible_character_at(text, start);
  return start + length == end ? length : 0;
}

LineCut line_cut_at(std::string_view text, std::size_t cut) {
  if (cut < 2 || cut > text.size()) return LineCut::none;
  if (text[cut - 1] == '\r') {
    const bool crlf = cut < text.size() && text[cut] == '\n';
    return crlf && visible_character_before(text, cut - 1) && visible_character_at(text, cut + 1)
               ? LineCut::crlf_after_cr
               : LineCut::none;
  }
  if (text[cut - 1] != '\n') return LineCut::none;
  if (text[cut - 2] == '\r') {
    return visible_character_before(text, cut - 2) && visible_character_at(text, cut) ? LineCut::crlf_after_lf
                                                                                     : LineCut::none;
  }
  if (!visible_character_before(text, cut - 1)) return LineCut::none;
  if (visible_character_at(text, cut)) return LineCut::tight;
  const bool spaced = cut < text.size() && text[cut] == ' ' && visible_character_at(text, cut + 1);
  return spaced ? LineCut::spaced : LineCut::none;
}

// Split patterns proven to restart at "x\n|y" and "x\n| y" (x, y visible: neither is whitespace to any
// engine), with the whole of y in the piece: the match holding x ends before the '\n' (letters, digits, and a
// run of punctuation or symbols, which stops at whitespace) or takes it and stops at y (punctuation runs with
// [\r\n]*, never more since y is neither '\r' nor '\n'); a match starting at the '\n' is that '\n' alone (no
// alternative lets '\n' lead letters or punctuation; \s*[\r\n]+ and \s*[\r\n] backtrack to it; GPT-2's
// \s+(?!\S) and \s+ give "\n" before y or " y" and at a text's end alike); none looks behind. So the text before
// the cut ends with the same pieces as alone, and the scan goes on from the cut. At "x\r\ny" the same holds at
// the CRLF cut named with each (CrlfCut): GPT-2's \s+(?!\S) gives "\r" (the '\n' after it is not \S) then
// "\n" (\s+), and "\r" alone at a text's end; the others' \s*[\r\n]+ and \s*[\r\n] give "\r\n" at once, before
// y as at a text's end, and a punctuation run takes "\r\n" with it in both. GPT-4o's pattern is not here: its
// [\r\n/]* joins ".\n/".
std::optional<CrlfCut> proven_line_pattern(const std::string& pattern) {
  struct Proven {
    const char* pattern;
    CrlfCut crlf;
  };
  static const std::vector<Proven> proven = {
      // GPT-2's (ByteLevel's use_regex, and as a Split)
      {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", CrlfCut::after_cr},
      // Llama 3's
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       CrlfCut::after_lf},
      // Qwen2's and Qwen3's
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       CrlfCut::after_lf},
      // GPT-4's (cl100k) and nanochat's
      {R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
       CrlfCut::after_lf},
      {R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
       CrlfCut::after_lf},
  };
  for (const Proven& p : proven) {
    if (pattern == p.pattern) return p.crlf;
  }
  return std::nullopt;
}

bool pattern_restarts_at(CrlfCut crlf, std::string_view text, std::size_t cut) {
  switch (line_cut_at(text, cut)) {
    case LineCut::tight:
    case LineCut::spaced:
      return true;
    case LineCut::crlf_after_cr:
      return crlf == CrlfCut::after_cr;
    case LineCut::crlf_after_lf:
      return crlf == CrlfCut::after_lf;
    case LineCut::none:
      break;
  }
  return false;
}

}  // namespace mygpt
