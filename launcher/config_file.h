#pragma once
// --config files: lines `name = value` (nanoGPT's configs, which are Python, read as they are written:
// quoted strings, `#` comments, True/False), and `config = FILE` lines that include other files.
#include <cstddef>
#include <string>
#include <vector>

namespace mygpt {

struct ConfigEntry {
  std::string name, value;
  std::size_t line = 0;  // 1-based, for messages
};

// The entries of one file's text. `#` starts a comment; a value in matching single or double quotes is
// the text between them, verbatim (a `#` or spaces inside included); an unquoted value is trimmed.
// A line that is not `name = value` (a name of letters, digits, `_`, `-` or `.`) or a quote left open is
// std::invalid_argument naming `path` and the line.
std::vector<ConfigEntry> config_entries(const std::string& text, const std::string& path);

// The text of a --config file, refusing anything that is not a regular file (a folder, a FIFO).
std::string read_config_file(const std::string& path);

// A --config file and the files it includes with `config = FILE` lines (FILE relative to the including
// file's folder), in the order their values take precedence: a file's own lines before its includes,
// a later include before an earlier one. The include lines are not among the entries. An include
// cycle, a chain deeper than 16 files or an empty `config =` is std::invalid_argument naming the files.
struct ConfigFile {
  std::string path;
  std::vector<ConfigEntry> entries;
};
std::vector<ConfigFile> read_config_files(const std::string& path);

}  // namespace mygpt
