#include "tokenizer/char_tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "common/strprintf.h"

namespace mygpt {

std::vector<char32_t> utf8_decode(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  auto fail = [](size_t at) {
    return std::invalid_argument("text is not valid UTF-8 (byte offset " + std::to_string(at) + ")");
  };
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    // Leads C0/C1 only start overlong forms and F5..FF would exceed U+10FFFF: both are never valid.
    const int extra = lead < 0x80                      ? 0
                      : (lead >= 0xC2 && lead <= 0xDF) ? 1
                      : (lead >> 4) == 0xE             ? 2
                      : (lead >= 0xF0 && lead <= 0xF4) ? 3
                                                       : -1;
    if (extra < 0 || i + extra >= text.size()) throw fail(i);
    char32_t cp = extra == 0 ? lead : lead & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto cont = static_cast<unsigned char>(text[i + k]);
      if ((cont >> 6) != 0x2) throw fail(i);
      cp = (cp << 6) | (cont & 0x3F);
    }
    // Shortest form only, no UTF-16 surrogates, nothing past U+10FFFF.
    static constexpr char32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinimum[extra] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) throw fail(i);
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("cannot build a character vocabulary from empty text");
  auto chars = utf8_decode(text);
  std::sort(chars.begin(), chars.end());
  chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
  CharTokenizer tokenizer;
  tokenizer.chars_ = std::move(chars);
  for (size_t i = 0; i < tokenizer.chars_.size(); ++i) tokenizer.ids_[tokenizer.chars_[i]] = static_cast<int64_t>(i);
  return tokenizer;
}

CharTokenizer CharTokenizer::from_vocabulary(std::string_view vocabulary) {
  CharTokenizer tokenizer;
  tokenizer.chars_ = utf8_decode(vocabulary);
  if (tokenizer.chars_.empty()) throw std::invalid_argument("character vocabulary is empty");
  for (size_t i = 0; i < tokenizer.chars_.size(); ++i) {
    if (!tokenizer.ids_.emplace(tokenizer.chars_[i], static_cast<int64_t>(i)).second) {
      throw std::invalid_argument("character vocabulary repeats a character");
    }
  }
  return tokenizer;
}

namespace {

// The vocabulary for a message, short: runs of consecutive code points as "a-z", invisible ones escaped.
std::string vocabulary_text(std::vector<char32_t> chars) {
  std::sort(chars.begin(), chars.end());
  const auto shown = [](char32_t cp) {
    if (cp == '\n') return std::string("\\n");
    if (cp == '\t') return std::string("\\t");
    if (cp == ' ') return std::string("space");
    if (cp < 0x20 || cp == 0x7f) return strprintf("\\x%02x", static_cast<unsigned>(cp));
    std::string text;
    utf8_append(text, cp);
    return text;
  };
  std::string out;
  for (size_t i = 0; i < chars.size();) {
    size_t j = i;
    while (j + 1 < chars.size() && chars[j + 1] == chars[j] + 1) ++j;
    if (!out.empty()) out += ' ';
    out += shown(chars[i]);
    if (j >= i + 2) out += "-" + shown(chars[j]);
    else if (j == i + 1) out += " " + shown(chars[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char32_t cp : utf8_decode(text)) {
    const auto it = ids_.find(cp);
    if (it == ids_.end()) {
      std::string ch;
      utf8_append(ch, cp);
      throw std::invalid_argument("character '" + ch + "' is not in the vocabulary of this character-level model, which " +
                                  "knows " + std::to_string(chars_.size()) + " characters: " + vocabulary_text(chars_));
    }
    ids.push_back(it->second);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw std::invalid_argument("token id " + std::to_string(id) + " is outside the character vocabulary");
    }
    utf8_append(out, chars_[static_cast<size_t>(id)]);
  }
  return out;
}

std::string CharTokenizer::vocabulary() const {
  std::string out;
  for (char32_t cp : chars_) utf8_append(out, cp);
  return out;
}

}  // namespace mygpt
