// llm.c .bin, npy and raw uint16 token files: the first byte picks the file name (.bin or .npy) and the
// vocabulary bound, the rest is the file. Bad files must be std::invalid_argument, nothing else.
#include <stdexcept>

#include "dataloader/token_file.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool npy = (data[0] & 1) != 0;
  const uint32_t vocab = (data[0] & 2) != 0 ? 50304 : 64;
  const auto path = mygpt::fuzz::write_input(npy ? "tokens.npy" : "tokens.bin", data + 1, size - 1);
  try {
    const mygpt::TokenFile file(path, vocab);
    if (file.size() > 0) {
      int64_t out[4];
      const auto n = static_cast<std::size_t>(std::min<uint64_t>(4, file.size()));
      file.read(file.size() - n, n, out);
      for (std::size_t i = 0; i < n; ++i) {
        if (out[i] < 0 || out[i] >= vocab) __builtin_trap();  // a token past the check
      }
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
