#include "model/hf/hf_export_check.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace mygpt {
namespace {

// A value as the message names it (the checkpoint text's forms).
std::string value_text(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}
std::string value_text(int64_t v) { return std::to_string(v); }
std::string value_text(bool v) { return v ? "true" : "false"; }
std::string value_text(const std::optional<double>& v) { return logit_softcap_text(v); }
template <typename Enum, typename = std::enable_if_t<std::is_enum_v<Enum>>>
std::string value_text(Enum v) {
  return enum_name(v);
}

}  // namespace

std::vector<std::string> config_fields_lost_without(const GptConfig& config, const std::vector<std::string>& kept) {
  const auto is_kept = [&](const char* name) { return std::find(kept.begin(), kept.end(), name) != kept.end(); };
  size_t fields_kept = 0;
  GptConfig reference;  // the default, with the kept fields (the sizes among them) this config's
#define MYGPT_COPY_KEPT(Type, name, ...) \
  if (is_kept(#name)) {                   \
    reference.name = config.name;         \
    ++fields_kept;                        \
  }
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_COPY_KEPT)
#undef MYGPT_COPY_KEPT
  if (fields_kept != kept.size()) throw std::logic_error("config_fields_lost_without: a kept name is no config field");
  std::vector<std::string> lost;
#define MYGPT_LOST_FIELD(Type, name, init, role, check, place, phrase, shown, help)                                \
  if (!is_kept(#name) &&                                                                                          \
      [](const GptConfig& c) { return shown; }(config) != [](const GptConfig& c) { return shown; }(reference)) { \
    lost.push_back(#name "=" + value_text(config.name));                                                          \
  }
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_LOST_FIELD)
#undef MYGPT_LOST_FIELD
  return lost;
}

void refuse_what_export_drops(const Gpt& model, const std::vector<HfTensorMap>& maps,
                              const std::vector<std::string>& carried, const std::string& target) {
  if (const auto lost = config_fields_lost_without(model->config(), carried); !lost.empty()) {
    std::string fields;
    for (const std::string& field : lost) fields += (fields.empty() ? "" : ", ") + field;
    throw std::invalid_argument("HF export: the model's " + fields + " has no place in " + target +
                                "'s config.json (the folder would compute another function)");
  }
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> carried_rows;  // parameter -> [begin, end)
  for (const HfTensorMap& m : maps) {
    carried_rows[m.ours].emplace_back(m.row_begin,
                                      m.rows > 0 ? m.row_begin + m.rows : std::numeric_limits<int64_t>::max());
  }
  for (const auto& parameter : model->named_parameters()) {
    const std::string& name = parameter.key();
    const int64_t rows = parameter.value().dim() == 0 ? 1 : parameter.value().size(0);
    auto spans = carried_rows[name];
    if (spans.empty()) {
      throw std::invalid_argument("HF export: the model's parameter " + name + " has no tensor in " + target +
                                  " (it would be dropped from the folder)");
    }
    std::sort(spans.begin(), spans.end());
    int64_t covered = 0, gap_end = rows;  // rows 0 .. covered - 1 are carried, covered .. gap_end - 1 not
    for (const auto& [begin, end] : spans) {
      if (begin > covered) {
        gap_end = std::min(begin, rows);
        break;
      }
      covered = std::max(covered, end);
    }
    if (covered < rows) {
      throw std::invalid_argument("HF export: rows " + std::to_string(covered) + ".." + std::to_string(gap_end - 1) +
                                  " of the model's parameter " + name + " have no tensor in " + target +
                                  " (they would be dropped from the folder)");
    }
  }
}

}  // namespace mygpt
