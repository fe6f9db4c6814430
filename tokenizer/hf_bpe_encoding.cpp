// Encoding with an HfBpeTokenizer: the UTF-8 check, then tokenizers' two passes for the added tokens (those
// matched on the raw text, then the normalizer and those matched on the normalized text), the text between
// them going to the pre-tokenizer (hf_pretokenizer.cpp).
#include <algorithm>
#include <array>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "common/file_io.h"
#include "common/strprintf.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/hf_bpe_tokenizer_impl.h"
#include "tokenizer/unicode_normalization.h"

namespace mygpt {
namespace {

using hf_bpe::AddedToken;
using hf_bpe::code_point_at;

// Unicode White_Space, which \s means in tokenizers' Rust regexes.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The start of the last code point of a non-empty text.
std::size_t last_code_point_start(std::string_view text) {
  std::size_t i = text.size() - 1;
  while (i > 0 && text.size() - i < 4 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return code_point_at(text, i).second == text.size() - i ? i : text.size() - 1;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

// tokenizers' NormalizedString::nfc()/nfkc(). The text is UTF-8: encode() checked it.
std::string HfBpeTokenizer::Impl::normalized(std::string_view text) const {
  std::string out(text);
  if (is_ascii(out)) return out;  // ASCII is its own NFC and NFKC
  try {
    for (const NormalForm form : normalizer) out = normalized_as_tokenizers(out, form);
  } catch (const std::invalid_argument& e) {
    refuse(std::string("the normalizer cannot normalize the text: ") + e.what());
  }
  return out;
}

bool HfBpeTokenizer::Impl::is_word_character(std::string_view text, std::size_t at) {
  const auto length = code_point_at(text, at).second;
  const auto match = word_character->next(text.substr(at, length), 0);
  return match.has_value();
}

// tokenizers' AddedVocabulary::find_matches over the text for one pass's tokens; the text between the
// matches goes to the next pass, and after the last to the pre-tokenizer.
// With specials_are_text, a special token's match is dropped but still consumes its text, which then goes
// on as ordinary text (tokenizers' encode_special_tokens does the same in find_matches).
void HfBpeTokenizer::Impl::encode_between_added(std::string_view text, std::size_t pass, bool specials_are_text,
                                                std::vector<int32_t>& out) {
  if (pass == 2) {
    encode_pretokenized(text, out);
  } else if (pass == 1 && !normalizer.empty()) {
    // tokenizers normalizes each piece the raw added tokens left, on its own, before the second pass.
    split_on_added(normalized(text), pass, specials_are_text, out);
  } else {
    split_on_added(text, pass, specials_are_text, out);
  }
}

void HfBpeTokenizer::Impl::split_on_added(std::string_view text, std::size_t pass, bool specials_are_text,
                                          std::vector<int32_t>& out) {
  const std::vector<AddedToken>& tokens = pass == 0 ? raw_added : normalized_added;
  std::array<bool, 256> starts_a_token{};  // most bytes start none: skip them without comparing
  for (const AddedToken& token : tokens) starts_a_token[static_cast<unsigned char>(token.content[0])] = true;
  std::size_t done = 0;  // the text before this is encoded
  for (std::size_t at = 0; at < text.size() && !tokens.empty();) {
    if (!starts_a_token[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    const AddedToken* found = nullptr;
    for (const AddedToken& token : tokens) {
      if (text.compare(at, token.content.size(), token.content) == 0) {
        found = &token;
        break;
      }
    }
    if (found == nullptr) {
      ++at;
      continue;
    }
    std::size_t start = at, stop = at + found->content.size();
    at = stop;  // a match discarded below still consumes its text, as aho-corasick's iterator does
    if (specials_are_text && found->special) continue;
    if (found->single_word) {
      const bool alone_before = start == 0 || !is_word_character(text, last_code_point_start(text.substr(0, start)));
      const bool alone_after = stop == text.size() || !is_word_character(text, stop);
      if (!alone_before || !alone_after) continue;
    }
    if (found->lstrip) {
      std::size_t s = start;
      while (s > done) {
        const std::size_t previous = last_code_point_start(text.substr(0, s));
        if (!is_white_space(code_point_at(text, previous).first)) break;
        s = previous;
      }
      start = s;
    }
    if (found->rstrip) {
      while (stop < text.size()) {
        const auto [cp, length] = code_point_at(text, stop);
        if (!is_white_space(cp)) break;
        stop += length;
      }
    }
    if (start > done) encode_between_added(text.substr(done, start - done), pass + 1, specials_are_text, out);
    out.push_back(found->id);
    done = stop;
    at = std::max(at, stop);
  }
  if (done < text.size()) encode_between_added(text.substr(done), pass + 1, specials_are_text, out);
}

std::vector<int32_t> HfBpeTokenizer::encode(std::string_view text, SpecialTokens specials) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  if (!impl_->normalizer.empty()) {
    if (const auto bad = first_invalid_utf8(text)) {
      impl_->refuse(
          strprintf("its normalizer needs UTF-8 text, and byte 0x%02X at byte offset %zu of the text does "
                    "not begin a valid UTF-8 character",
                    static_cast<unsigned char>(text[*bad]), *bad));
    }
  }
  const std::lock_guard lock(impl_->encode_mutex);
  impl_->encode_between_added(text, 0, specials == SpecialTokens::as_text, ids);
  return ids;
}

}  // namespace mygpt
