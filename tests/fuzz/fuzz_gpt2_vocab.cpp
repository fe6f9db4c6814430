// GPT-2's encoder.json and vocab.bpe: the input up to the first NUL byte is encoder.json, the rest is
// vocab.bpe. A tokenizer that loads must then encode and decode text without failing.
#include <algorithm>
#include <stdexcept>

#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* end = data + size;
  const auto* split = std::find(data, end, uint8_t{0});
  mygpt::fuzz::write_input("encoder.json", data, static_cast<size_t>(split - data));
  const auto* merges = split == end ? end : split + 1;
  mygpt::fuzz::write_input("vocab.bpe", merges, static_cast<size_t>(end - merges));
  try {
    const auto tokenizer = mygpt::Gpt2BpeTokenizer::load(mygpt::fuzz::scratch_folder());
    const auto ids = tokenizer.encode("Hello world, fuzz! \xc3\xa9t\xc3\xa9 123", /*allow_special=*/true);
    (void)tokenizer.decode(ids);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
