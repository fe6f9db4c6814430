#include "launcher/option_table.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "common/file_io.h"

namespace mygpt {

void refuse_placeholder_text(const std::string& text, const std::string& where) {
  for (size_t open = text.find('%'); open != std::string::npos; open = text.find('%', open + 1)) {
    size_t end = open + 1;
    while (end < text.size() && (std::islower(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_')) ++end;
    if (end > open + 1 && end < text.size() && text[end] == '%') {
      throw std::invalid_argument(where + " holds '" + text.substr(open, end - open + 1) +
                                  "': %word% sequences are not accepted (the option parser reserves them)");
    }
  }
}

std::string read_config_file(const std::string& path) {
  // A config file is small; refusing large ones keeps a mistyped path (a dataset) from being read whole.
  return read_whole_file(path, "config file", std::size_t{1} << 20);
}

std::string unknown_option_hint(const std::string& unknown, const std::vector<std::string>& known) {
  std::string name = unknown.substr(unknown.find_first_not_of('-') == std::string::npos ? 0 : unknown.find_first_not_of('-'));
  const auto is_known = [&](const std::string& n) { return std::find(known.begin(), known.end(), n) != known.end(); };
  // nanoGPT's configurator names (config/*.py, --key=value) for what is named otherwise here.
  static const std::map<std::string, std::string> nanogpt = {
      {"learning_rate", "lr"},          {"max_iters", "steps"},         {"lr_decay_iters", "steps"},
      {"warmup_iters", "warmup-steps"}, {"eval_iters", "eval-steps"},   {"eval_interval", "eval-every"},
      {"log_interval", "log-every"},    {"out_dir", "out"},             {"dataset", "data"},
      {"gradient_accumulation_steps", "grad-accum"}, {"grad_clip", "grad-clip"}};
  if (const auto it = nanogpt.find(name); it != nanogpt.end() && is_known(it->second)) {
    return " (nanoGPT's " + name + " is " + it->second + " here)";
  }
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  if (dashed != name && is_known(dashed)) return " (names use dashes: " + dashed + ")";
  return "";
}

}  // namespace mygpt
