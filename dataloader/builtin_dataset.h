#pragma once
// A built-in dataset the program generates itself, so the demo runs offline and its success is easy
// to judge: "sort" lines such as "830591=013589" (a digit string, '=', the same digits sorted).
// A model that learned the task sorts digit strings it never saw; held-out accuracy measures that.
#include <cstdint>
#include <string>
#include <vector>

namespace mygpt {

struct TaskExample {
  std::string prompt;  // "830591="
  std::string answer;  // "013589\n"
};

// Names accepted after "builtin:" on the command line.
std::vector<std::string> builtin_dataset_names();
bool is_builtin_dataset(const std::string& data_spec);  // "builtin:<name>"

// The training text: `lines` examples drawn from `seed`. Unknown names throw std::invalid_argument.
constexpr size_t kBuiltinTrainingLines = 40000;
std::string builtin_dataset_text(const std::string& data_spec, size_t lines = kBuiltinTrainingLines, uint64_t seed = 1);
// Held-out examples: drawn from a separate stream, none of their prompts occurs in the training text
// made from the same lines and seed.
std::vector<TaskExample> builtin_heldout_examples(const std::string& data_spec, size_t count,
                                                  size_t training_lines = kBuiltinTrainingLines, uint64_t seed = 1);

}  // namespace mygpt
