#include "launcher/config_file.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "common/file_io.h"

namespace mygpt {
namespace {

constexpr std::size_t kMaxConfigDepth = 16;

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

bool is_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

// The value after `=`: quoted text verbatim, else up to a comment, trimmed. nanoGPT writes strings as
// Python does (out_dir = 'out-shakespeare-char'); taking the quotes as part of the value made a folder
// named `'out-shakespeare-char'`.
std::string entry_value(const std::string& rest, const std::string& where) {
  const std::string value = trimmed(rest);
  if (value.empty() || (value.front() != '"' && value.front() != '\'')) return trimmed(rest.substr(0, rest.find('#')));
  const auto close = value.find(value.front(), 1);
  if (close == std::string::npos) throw std::invalid_argument(where + ": the quote " + value.front() + " is never closed");
  const std::string after = trimmed(value.substr(close + 1));
  if (!after.empty() && after.front() != '#') {
    throw std::invalid_argument(where + ": text after the quoted value (" + after.substr(0, 20) + ")");
  }
  return value.substr(1, close - 1);
}

// Appends path's entries (include lines left out) and then its includes', the last include first.
// `chain` holds the files that include this one, for cycles.
void read_config_tree(const std::filesystem::path& path, std::vector<std::filesystem::path>& chain,
                      std::vector<ConfigFile>& out) {
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
  ConfigFile file{path.string(), {}};
  std::vector<std::filesystem::path> includes;
  std::string text;
  try {
    text = read_config_file(path.string());
  } catch (const std::invalid_argument& e) {
    // A file that cannot be read is named with the file that asked for it (the user wrote that line).
    if (chain.empty()) throw;
    throw std::invalid_argument(std::string(e.what()) + " (included by config file '" + chain.back().string() + "')");
  }
  for (ConfigEntry& entry : config_entries(text, path.string())) {
    if (entry.name != "config") {
      file.entries.push_back(std::move(entry));
      continue;
    }
    if (entry.value.empty()) throw std::invalid_argument("config file '" + path.string() + "': 'config =' names no file");
    // Relative to the including file, wherever the program runs.
    const std::filesystem::path target(entry.value);
    includes.push_back(target.is_absolute() ? target : path.parent_path() / target);
  }
  out.push_back(std::move(file));
  chain.push_back(key);
  for (auto it = includes.rbegin(); it != includes.rend(); ++it) read_config_tree(*it, chain, out);
  chain.pop_back();
}

}  // namespace

std::vector<ConfigEntry> config_entries(const std::string& text, const std::string& path) {
  std::vector<ConfigEntry> entries;
  std::istringstream lines(text);
  std::size_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::string where = "config file '" + path + "' line " + std::to_string(number);
    if (trimmed(line.substr(0, line.find('#'))).empty()) continue;  // blank or a comment
    const auto eq = line.find('=');
    const std::string name = eq == std::string::npos ? "" : trimmed(line.substr(0, eq));
    // The line itself is not repeated: it may be anything (binary garbage, a section header).
    if (!is_name(name)) throw std::invalid_argument(where + " is not a `name = value` line");
    entries.push_back({name, entry_value(line.substr(eq + 1), where), number});
  }
  return entries;
}

std::string read_config_file(const std::string& path) {
  // A config file is small; refusing large ones keeps a mistyped path (a dataset) from being read whole.
  return read_whole_file(path, "config file", std::size_t{1} << 20);
}

std::vector<ConfigFile> read_config_files(const std::string& path) {
  std::vector<ConfigFile> files;
  std::vector<std::filesystem::path> chain;
  read_config_tree(path, chain, files);
  return files;
}

}  // namespace mygpt
