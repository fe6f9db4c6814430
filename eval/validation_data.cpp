#include "eval/validation_data.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "common/file_io.h"
#include "dataloader/chat_data.h"
#include "dataloader/token_file.h"
#include "dataloader/token_stream.h"

namespace mygpt {

namespace fs = std::filesystem;

std::vector<fs::path> validation_files(const std::string& spec) {
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    bool any_val = false;
    for (const auto& entry : fs::directory_iterator(spec, ec)) {
      const std::string name = entry.path().filename().string();
      any_val = any_val || (name.find("val") != std::string::npos && name.front() != '.');
    }
    if (!any_val) {
      throw std::invalid_argument("--val folder '" + spec + "' holds no *val* files (eval scores validation shards)");
    }
    return expand_token_paths(spec, "val");
  }
  return expand_token_paths(spec);
}

bool is_text_file(const std::string& spec) {
  std::error_code ec;
  return fs::is_regular_file(spec, ec) && !looks_like_token_file(spec);
}

std::shared_ptr<const TokenSource> validation_text_tokens(const std::string& path, const TextCodec& codec,
                                                          double val_fraction) {
  const std::string text = read_text_file(path, "--val text file");
  if (text.empty()) throw std::invalid_argument("--val text file '" + path + "' is empty");
  if (val_fraction <= 0) throw std::invalid_argument("--val-fraction must be above 0 (it is the share of the text scored)");
  try {
    // Ordinary text, as train encodes a text file (special tokens' text is text).
    if (val_fraction >= 1) return std::make_shared<InMemoryTokens>(codec.encode_ordinary(text));
    // The held-out end, cut at the same token as train's --val-fraction cuts it.
    return std::make_shared<InMemoryTokens>(split_train_val(codec.encode_ordinary(text), val_fraction).second);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--val text file '" + path + "': " + e.what());
  }
}

bool holds_conversations(const std::string& path) {
  if (!is_text_file(path)) return false;
  const std::string text = read_whole_file(path, "--val file");
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      try {
        static_cast<void>(parse_chat_record(line));
        return true;
      } catch (const std::invalid_argument&) {
        return false;
      }
    }
    start = end + 1;
  }
  return false;
}

}  // namespace mygpt
