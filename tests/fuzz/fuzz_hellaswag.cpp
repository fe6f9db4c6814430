// HellaSwag files: the official jsonl and llama.cpp's 6-line text (the first byte picks the name).
#include <stdexcept>

#include "eval/hellaswag_reader.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto path = mygpt::fuzz::write_input((data[0] & 1) != 0 ? "hellaswag.jsonl" : "hellaswag.txt", data + 1, size - 1);
  try {
    const auto examples = mygpt::read_hellaswag(path);
    for (const auto& e : examples) {
      if (e.label < 0 || e.label > 3) __builtin_trap();  // a label past the check
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
