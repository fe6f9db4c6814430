// HellaSwag multiple-choice examples (context + 4 candidate endings + the index of the right one),
// read from either of the two files the evaluation meets in practice; the format is told by content:
//
//   - the official `hellaswag_val.jsonl` (rowanz/hellaswag): one JSON object per line with `ctx`,
//     `endings` (4 strings) and `label` (0..3); context = ctx, as build-nanogpt and llm.c use it.
//     Detected by a first non-blank character of '{'.
//   - llama.cpp's text format (`hellaswag_val_full.txt`): 6 lines per task, the context
//     ("<activity label>: <ctx>"), the label, then the 4 endings. Its text was preprocessed
//     ([header]/[title]/[step] markers removed, double spaces collapsed), so its scores are not
//     directly comparable with numbers from the jsonl file.
//
// Endings are stored as written. The scorer appends " " + ending to the context (both formats'
// endings lack the joining space, and GPT-2 tokens carry their leading space).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mygpt {

struct HellaSwagExample {
  std::string context;
  std::array<std::string, 4> endings;
  int label = 0;  // index of the correct ending, 0..3
};

// Any problem (missing or empty file, malformed JSON, a missing field, an empty ending, a label outside 0..3, a text
// file whose line count is not a multiple of 6) throws std::invalid_argument with a one-line
// message naming the file and, where there is one, the line number.
std::vector<HellaSwagExample> read_hellaswag(const std::filesystem::path& path);

class TextCodec;

// An example as the scorer takes it: token ids of the context and of " " + each ending.
struct TokenizedHellaSwag {
  std::vector<int64_t> context;
  std::array<std::vector<int64_t>, 4> endings;
  int label = 0;
};

// Reads path and tokenizes its first `limit` examples (all when limit is 0): only what is scored
// is encoded, since BPE over all 10k validation examples takes seconds. A limit above the file's
// count is std::invalid_argument.
std::vector<TokenizedHellaSwag> read_tokenized_hellaswag(const std::filesystem::path& path, const TextCodec& codec,
                                                         int64_t limit);

}  // namespace mygpt
