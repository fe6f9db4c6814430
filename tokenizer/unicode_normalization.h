#pragma once
// Unicode normalization as Hugging Face tokenizers' NFC and NFKC normalizers do it: with Unicode 9.0's
// tables. utf8proc, which does the work, has a newer Unicode (15 on Debian 12, newer on Homebrew); the
// two agree on every character 9.0 had assigned (Unicode's normalization stability policy), and a
// character assigned later is to tokenizers a starter that decomposes to itself and composes with
// nothing. Such a character is therefore a wall the normalization cannot see across: the text is
// normalized in the pieces between those characters, and they are kept as they are.
#include <string>
#include <string_view>

namespace mygpt {

enum class NormalForm { nfc, nfkc };

// Whether Unicode 9.0 had assigned `code_point` (surrogates, private use and noncharacters included).
bool assigned_in_unicode_9(char32_t code_point);

// `text` in `form`, as tokenizers 0.2x normalizes it. `text` must be valid UTF-8; otherwise throws
// std::invalid_argument with utf8proc's reason.
std::string normalized_as_tokenizers(std::string_view text, NormalForm form);

}  // namespace mygpt
