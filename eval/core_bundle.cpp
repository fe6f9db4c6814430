#include "eval/core_bundle.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/file_io.h"

namespace mygpt {
namespace fs = std::filesystem;
using nlohmann::json;

std::string_view core_task_type_name(CoreTaskType type) {
  switch (type) {
    case CoreTaskType::multiple_choice:
      return "multiple_choice";
    case CoreTaskType::schema:
      return "schema";
    case CoreTaskType::language_modeling:
      return "language_modeling";
  }
  throw std::logic_error("unnamed CORE task type");
}

std::vector<std::vector<std::string>> parse_csv(std::string_view text, const std::string& source) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) row.push_back(std::move(field));
      if (!row.empty()) rows.push_back(std::move(row));  // Python's csv skips blank lines too
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) throw std::invalid_argument(source + ": a quoted field is not closed before the end of the file");
  if (any || !field.empty()) row.push_back(std::move(field));
  if (!row.empty()) rows.push_back(std::move(row));
  return rows;
}

namespace {

[[noreturn]] void refuse(const fs::path& file, const std::string& problem) {
  throw std::invalid_argument(file.string() + ": " + problem);
}

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n\f\v");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n\f\v") - b + 1));
}

// "Eval Task" -> "Random baseline" (percent), as base_eval.py's csv.DictReader reads it (a later row of the
// same task wins).
std::map<std::string, double> read_random_baselines(const fs::path& file) {
  const std::string text = read_text_file(file, "CORE bundle's meta data");
  const auto rows = parse_csv(text.rfind("\xEF\xBB\xBF", 0) == 0 ? std::string_view(text).substr(3) : text, file.string());
  if (rows.empty()) refuse(file, "is empty (expected a header with \"Eval Task\" and \"Random baseline\")");
  int task_column = -1, baseline_column = -1;
  for (size_t c = 0; c < rows[0].size(); ++c) {
    if (rows[0][c] == "Eval Task") task_column = static_cast<int>(c);
    if (rows[0][c] == "Random baseline") baseline_column = static_cast<int>(c);
  }
  if (task_column < 0 || baseline_column < 0) refuse(file, "has no \"Eval Task\" or no \"Random baseline\" column");
  std::map<std::string, double> baselines;
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    const auto need = static_cast<size_t>(std::max(task_column, baseline_column));
    if (row.size() <= need) refuse(file, "row " + std::to_string(r + 1) + " has too few fields");
    const std::string value = trimmed(row[static_cast<size_t>(baseline_column)]);
    char* end = nullptr;
    const double baseline = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size()) {
      refuse(file, "row " + std::to_string(r + 1) + ": \"Random baseline\" '" + value + "' is not a number");
    }
    if (!(baseline >= 0 && baseline < 100)) {
      refuse(file, "row " + std::to_string(r + 1) + ": \"Random baseline\" " + value + " is outside [0, 100) percent");
    }
    baselines[row[static_cast<size_t>(task_column)]] = baseline;
  }
  return baselines;
}

// Jinja renders a value with Python's str(); a string is itself and an integer its digits. Anything else
// (floats, booleans, lists) is refused rather than rendered differently from Python.
std::string text_of(const json& value, const std::string& field) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return value.dump();
  throw std::invalid_argument("\"" + field + "\" is not a string");
}

std::vector<std::string> texts_of(const json& item, const std::string& field) {
  const auto it = item.find(field);
  if (it == item.end() || !it->is_array()) throw std::invalid_argument("has no \"" + field + "\" list");
  if (it->empty()) throw std::invalid_argument("\"" + field + "\" is empty");
  std::vector<std::string> out;
  for (const json& v : *it) out.push_back(text_of(v, field + "\" entry \""));
  return out;
}

std::string text_field(const json& item, const std::string& field) {
  const auto it = item.find(field);
  if (it == item.end()) throw std::invalid_argument("has no \"" + field + "\"");
  return text_of(*it, field);
}

int64_t gold_of(const json& item, size_t choices) {
  const auto it = item.find("gold");
  if (it == item.end() || !it->is_number_integer()) throw std::invalid_argument("has no integer \"gold\"");
  const auto gold = it->get<int64_t>();
  if (gold < 0 || gold >= static_cast<int64_t>(choices)) {
    throw std::invalid_argument("\"gold\" " + std::to_string(gold) + " is outside 0.." + std::to_string(choices - 1));
  }
  return gold;
}

CoreItem read_item(const std::string& line, CoreTaskType type) {
  json item;
  try {
    item = json::parse(line);
  } catch (const json::exception&) {
    throw std::invalid_argument("is not JSON");
  }
  if (!item.is_object()) throw std::invalid_argument("is not a JSON object");
  CoreItem out;
  switch (type) {
    case CoreTaskType::multiple_choice:
      out.query = text_field(item, "query");
      out.choices = texts_of(item, "choices");
      out.gold = gold_of(item, out.choices.size());
      break;
    case CoreTaskType::schema:
      out.context_options = texts_of(item, "context_options");
      out.continuation = text_field(item, "continuation");
      out.gold = gold_of(item, out.context_options.size());
      break;
    case CoreTaskType::language_modeling:
      out.context = text_field(item, "context");
      out.continuation = text_field(item, "continuation");
      break;
  }
  return out;
}

std::vector<CoreItem> read_items(const fs::path& file, CoreTaskType type) {
  const std::string text = read_whole_file(file, "CORE task data");
  std::vector<CoreItem> items;
  size_t start = 0;
  for (int64_t line_number = 1; start < text.size(); ++line_number) {
    const size_t stop = std::min(text.find('\n', start), text.size());
    const std::string_view line = std::string_view(text).substr(start, stop - start);
    start = stop + 1;
    if (trimmed(line).empty()) continue;  // a blank line holds no item
    const std::string where = file.string() + ":" + std::to_string(line_number);
    if (const auto bad = first_invalid_utf8(line)) {
      throw std::invalid_argument(where + ": not UTF-8 (byte " + std::to_string(*bad + 1) + " of the line)");
    }
    try {
      items.push_back(read_item(std::string(line), type));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": the " + std::string(core_task_type_name(type)) + " item " + e.what());
    }
    items.back().line = line_number;
  }
  if (items.empty()) refuse(file, "holds no items");
  return items;
}

CoreTaskType parse_task_type(const std::string& name, const fs::path& yaml, const std::string& label) {
  for (CoreTaskType t : {CoreTaskType::multiple_choice, CoreTaskType::schema, CoreTaskType::language_modeling}) {
    if (core_task_type_name(t) == name) return t;
  }
  refuse(yaml, "task '" + label + "' has icl_task_type '" + name +
                   "' (known: multiple_choice, schema, language_modeling)");
}

std::string yaml_line(const YAML::Node& node) {
  return node.Mark().is_null() ? std::string() : " (line " + std::to_string(node.Mark().line + 1) + ")";
}

}  // namespace

CoreBundle read_core_bundle(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::invalid_argument("--core '" + dir.string() + "' is not a folder (the unzipped eval_bundle)");
  }
  const fs::path yaml_file = dir / "core.yaml";
  const std::string yaml_text = read_text_file(yaml_file, "CORE bundle's task list");
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    refuse(yaml_file, "bad YAML" +
                          (e.mark.is_null() ? std::string()
                                            : " at line " + std::to_string(e.mark.line + 1) + ", column " +
                                                  std::to_string(e.mark.column + 1)) +
                          ": " + e.msg);
  }
  const std::map<std::string, double> baselines = read_random_baselines(dir / "eval_meta_data.csv");
  if (!root.IsMap() || !root["icl_tasks"] || !root["icl_tasks"].IsSequence() || root["icl_tasks"].size() == 0) {
    refuse(yaml_file, "has no icl_tasks list");
  }
  CoreBundle bundle{dir, {}};
  std::set<std::string> labels;
  for (const YAML::Node& node : root["icl_tasks"]) {
    const std::string at = yaml_line(node);
    if (!node.IsMap()) refuse(yaml_file, "an icl_tasks entry is not a mapping" + at);
    auto scalar = [&](const char* key, bool required) -> std::optional<std::string> {
      const YAML::Node v = node[key];
      if (!v) {
        if (required) refuse(yaml_file, std::string("an icl_tasks entry has no ") + key + at);
        return std::nullopt;
      }
      if (!v.IsScalar()) refuse(yaml_file, std::string("an icl_tasks entry's ") + key + " is not a scalar" + yaml_line(v));
      return v.Scalar();
    };
    CoreTask task;
    task.label = *scalar("label", true);
    if (!labels.insert(task.label).second) refuse(yaml_file, "task '" + task.label + "' is listed twice" + at);
    task.file = dir / "eval_data" / *scalar("dataset_uri", true);
    task.type = parse_task_type(*scalar("icl_task_type", true), yaml_file, task.label);
    if (const auto delimiter = scalar("continuation_delimiter", false)) task.continuation_delimiter = *delimiter;
    const YAML::Node shots = node["num_fewshot"];
    if (!shots || !shots.IsSequence() || shots.size() == 0 || !shots[0].IsScalar()) {
      refuse(yaml_file, "task '" + task.label + "' has no num_fewshot list" + at);
    }
    const std::string first = shots[0].Scalar();
    const auto parsed = std::from_chars(first.data(), first.data() + first.size(), task.num_fewshot);
    if (parsed.ec != std::errc() || parsed.ptr != first.data() + first.size() || task.num_fewshot < 0) {
      refuse(yaml_file, "task '" + task.label + "': num_fewshot '" + first + "' is not a count" + yaml_line(shots[0]));
    }
    const auto baseline = baselines.find(task.label);
    if (baseline == baselines.end()) {
      refuse(dir / "eval_meta_data.csv", "has no \"Eval Task\" row for task '" + task.label + "' of core.yaml");
    }
    task.random_baseline = baseline->second;
    bundle.tasks.push_back(std::move(task));
  }
  // The YAML and CSV are checked before any task file is read (those are large).
  for (CoreTask& task : bundle.tasks) task.items = read_items(task.file, task.type);
  return bundle;
}

}  // namespace mygpt
