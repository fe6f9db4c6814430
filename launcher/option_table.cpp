#include "launcher/option_table.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>
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

namespace {

constexpr std::size_t kMaxConfigDepth = 16;

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// Appends path's text (include lines blanked, so Boost's line numbers stay right) and then its includes',
// the last include first. `chain` holds the files that include this one, for cycles.
void read_config_tree(const std::filesystem::path& path, std::vector<std::filesystem::path>& chain,
                      std::vector<ConfigFileText>& out) {
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  const std::filesystem::path key = ec ? path : canonical;
  if (std::find(chain.begin(), chain.end(), key) != chain.end()) {
    std::string cycle;
    for (auto it = std::find(chain.begin(), chain.end(), key); it != chain.end(); ++it) cycle += it->string() + " -> ";
    throw std::invalid_argument("config file '" + chain.back().string() + "' includes '" + path.string() +
                                "', which is already being read (an include cycle: " + cycle + key.string() + ")");
  }
  if (chain.size() == kMaxConfigDepth) {
    throw std::invalid_argument("config file '" + path.string() + "' is included more than " +
                                std::to_string(kMaxConfigDepth) + " files deep");
  }
  std::istringstream lines(read_config_file(path.string()));
  std::string text;
  std::vector<std::filesystem::path> includes;
  for (std::string line; std::getline(lines, line);) {
    // Boost's syntax: `name = value`, '#' starts a comment.
    const std::string content = trimmed(line.substr(0, line.find('#')));
    const auto eq = content.find('=');
    if (eq != std::string::npos && trimmed(content.substr(0, eq)) == "config") {
      const std::string target = trimmed(content.substr(eq + 1));
      if (target.empty()) throw std::invalid_argument("config file '" + path.string() + "': 'config =' names no file");
      // Relative to the including file, wherever the program runs.
      includes.push_back(std::filesystem::path(target).is_absolute() ? std::filesystem::path(target)
                                                                      : path.parent_path() / target);
      line.clear();
    }
    text += line + "\n";
  }
  out.push_back({path.string(), std::move(text)});
  chain.push_back(key);
  for (auto it = includes.rbegin(); it != includes.rend(); ++it) read_config_tree(*it, chain, out);
  chain.pop_back();
}

}  // namespace

std::vector<ConfigFileText> read_config_files(const std::string& path) {
  std::vector<ConfigFileText> files;
  std::vector<std::filesystem::path> chain;
  read_config_tree(path, chain, files);
  return files;
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
