#include "eval/hellaswag_reader.h"
#include "common/file_io.h"

#include "tokenizer/text_codec.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

namespace mygpt {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kLinesPerTextTask = 6;  // context, label, 4 endings

// The file's lines without their line ends; a final newline does not start another line.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline;
    std::string_view line = text.substr(start, end - start);
    if (line.ends_with('\r')) line.remove_suffix(1);  // a copy that went through Windows
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kBlank = " \t\r\n";
  const std::size_t first = s.find_first_not_of(kBlank);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kBlank) - first + 1);
}

std::string at_line(const fs::path& path, std::size_t line_number) {
  return path.string() + ":" + std::to_string(line_number) + ": ";
}

HellaSwagExample parse_json_line(std::string_view line, const fs::path& path, std::size_t line_number) {
  nlohmann::json task;
  try {
    task = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers too large (found by fuzzing)
    throw std::invalid_argument(at_line(path, line_number) + "malformed JSON: " + e.what());
  }
  const auto fail = [&](const std::string& problem) {
    throw std::invalid_argument(at_line(path, line_number) + problem);
  };
  if (!task.is_object()) fail("expected a JSON object");
  HellaSwagExample example;

  const auto ctx = task.find("ctx");
  if (ctx == task.end() || !ctx->is_string()) fail("missing field 'ctx' (a string)");
  example.context = ctx->get<std::string>();

  const auto endings = task.find("endings");
  if (endings == task.end()) fail("missing field 'endings' (an array of 4 strings)");
  if (!endings->is_array() || endings->size() != example.endings.size()) {
    fail("field 'endings' must be an array of 4 strings" +
         (endings->is_array() ? ", not " + std::to_string(endings->size()) : std::string()));
  }
  for (std::size_t i = 0; i < example.endings.size(); ++i) {
    if (!(*endings)[i].is_string()) fail("field 'endings' must hold 4 strings");
    example.endings[i] = (*endings)[i].get<std::string>();
    // An empty ending scores no tokens: it would win or lose by nothing but its absence.
    if (trim(example.endings[i]).empty()) fail("ending " + std::to_string(i) + " of field 'endings' is empty");
  }

  // The official file stores the label as a number; some re-exports (HuggingFace) as a string.
  const auto label = task.find("label");
  if (label == task.end()) fail("missing field 'label' (0..3)");
  if (label->is_number_integer()) {
    const int64_t value = label->get<int64_t>();
    example.label = value >= 0 && value <= 3 ? static_cast<int>(value) : -1;
  } else if (label->is_string() && label->get<std::string>().size() == 1) {
    const char digit = label->get<std::string>()[0];
    example.label = digit >= '0' && digit <= '3' ? digit - '0' : -1;
  } else {
    example.label = -1;
  }
  if (example.label < 0) fail("label must be 0, 1, 2 or 3, found " + label->dump());
  return example;
}

std::vector<HellaSwagExample> read_jsonl(std::string_view text, const fs::path& path) {
  std::vector<HellaSwagExample> examples;
  const std::vector<std::string_view> lines = split_lines(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    examples.push_back(parse_json_line(lines[i], path, i + 1));
  }
  return examples;
}

std::vector<HellaSwagExample> read_six_line_tasks(std::string_view text, const fs::path& path) {
  const std::vector<std::string_view> lines = split_lines(text);
  if (lines.size() % kLinesPerTextTask != 0) {
    throw std::invalid_argument(at_line(path, lines.size()) +
                                "the file ends inside a task: " + std::to_string(lines.size()) +
                                " lines is not a multiple of 6 (context, label, 4 endings per task)");
  }
  std::vector<HellaSwagExample> examples(lines.size() / kLinesPerTextTask);
  for (std::size_t task = 0; task < examples.size(); ++task) {
    const std::size_t first = task * kLinesPerTextTask;
    HellaSwagExample& example = examples[task];
    example.context = lines[first];
    const std::string_view label = trim(lines[first + 1]);
    if (label.size() != 1 || label[0] < '0' || label[0] > '3') {
      throw std::invalid_argument(at_line(path, first + 2) + "label must be 0, 1, 2 or 3, found \"" +
                                  std::string(lines[first + 1]) + "\"");
    }
    example.label = label[0] - '0';
    for (std::size_t i = 0; i < example.endings.size(); ++i) {
      if (trim(lines[first + 2 + i]).empty()) {
        throw std::invalid_argument(at_line(path, first + 3 + i) + "ending " + std::to_string(i) +
                                    " of the task is empty (context, label, then 4 non-empty endings per task)");
      }
      example.endings[i] = lines[first + 2 + i];
    }
  }
  return examples;
}

}  // namespace

std::vector<HellaSwagExample> read_hellaswag(const std::filesystem::path& path) {
  const std::string file = read_text_file(path, "HellaSwag file");
  std::string_view text = file;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  const std::string_view content = trim(text);
  if (content.empty()) throw std::invalid_argument(path.string() + ": HellaSwag file is empty");
  return content.front() == '{' ? read_jsonl(text, path) : read_six_line_tasks(text, path);
}

std::vector<TokenizedHellaSwag> read_tokenized_hellaswag(const std::filesystem::path& path, const TextCodec& codec,
                                                         int64_t limit) {
  std::vector<HellaSwagExample> examples = read_hellaswag(path);
  // Scoring fewer examples than asked for would report an accuracy over another set than the one named.
  if (limit > 0 && static_cast<size_t>(limit) > examples.size()) {
    throw std::invalid_argument("HellaSwag file '" + path.string() + "' holds " + std::to_string(examples.size()) +
                                " examples, fewer than the " + std::to_string(limit) + " asked for");
  }
  if (limit > 0) examples.resize(static_cast<size_t>(limit));
  std::vector<TokenizedHellaSwag> out;
  out.reserve(examples.size());
  for (const HellaSwagExample& ex : examples) {
    TokenizedHellaSwag t;
    t.context = codec.encode(ex.context);
    for (size_t k = 0; k < 4; ++k) t.endings[k] = codec.encode(" " + ex.endings[k]);
    t.label = ex.label;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace mygpt
