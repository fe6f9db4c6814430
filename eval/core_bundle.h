#pragma once
// The CORE eval bundle (DCLM's 22 in-context tasks, as nanochat downloads it in eval_bundle.zip) read from
// its unzipped folder:
//   core.yaml            icl_tasks: a list of {label, dataset_uri, num_fewshot (a list: the first value is
//                        used), icl_task_type (multiple_choice | schema | language_modeling),
//                        continuation_delimiter (default " ")}
//   eval_meta_data.csv   columns "Eval Task" and "Random baseline" (percent), among others
//   eval_data/<uri>      JSON lines: multiple choice {query, choices, gold}; schema {context_options,
//                        continuation, gold}; language modeling {context, continuation}
// Every problem (a missing or unreadable file, bad YAML, an unknown task type, a task the CSV lacks, a
// line that is not UTF-8 or not the task's JSON, gold out of range, empty choices) is std::invalid_argument
// with one line naming the file and, in a JSON lines file, the line.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mygpt {

enum class CoreTaskType { multiple_choice, schema, language_modeling };
std::string_view core_task_type_name(CoreTaskType type);

// One line of a task's file; the fields its type has.
struct CoreItem {
  std::string query;                         // multiple choice
  std::vector<std::string> choices;          // multiple choice
  std::vector<std::string> context_options;  // schema
  std::string context;                       // language modeling
  std::string continuation;                  // schema, language modeling
  int64_t gold = 0;                          // multiple choice, schema
  int64_t line = 0;                          // in its file, from 1 (for messages)
};

struct CoreTask {
  std::string label;
  std::filesystem::path file;  // eval_data/<dataset_uri>
  CoreTaskType type = CoreTaskType::multiple_choice;
  int64_t num_fewshot = 0;
  std::string continuation_delimiter = " ";
  double random_baseline = 0;  // percent, from eval_meta_data.csv
  std::vector<CoreItem> items;  // in the file's order
};

struct CoreBundle {
  std::filesystem::path dir;
  std::vector<CoreTask> tasks;  // in core.yaml's order
};

CoreBundle read_core_bundle(const std::filesystem::path& dir);

// Python's csv module's reading of one RFC 4180 text (quoted fields, "" inside quotes, newlines inside
// quotes): its rows of fields. Exposed for the tests.
std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& source);

}  // namespace mygpt
