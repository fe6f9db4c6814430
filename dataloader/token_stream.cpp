#include "dataloader/token_stream.h"

#include <glob.h>

#include <algorithm>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace mygpt {

namespace {

[[noreturn]] void fail_spec(const std::string& spec, std::string_view split, const std::string& problem) {
  std::string message = "token data '" + spec + "'";
  if (!split.empty()) message += " (split '" + std::string(split) + "')";
  throw std::invalid_argument(message + ": " + problem);
}

// Owns the result of glob(3); globfree on every exit path.
class GlobResult {
 public:
  GlobResult() = default;
  ~GlobResult() { ::globfree(&result_); }
  GlobResult(const GlobResult&) = delete;
  GlobResult& operator=(const GlobResult&) = delete;
  glob_t* get() { return &result_; }

 private:
  glob_t result_{};
};

bool names_regular_file(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);  // follows symlinks; false on error
}

bool name_matches(const std::filesystem::path& path, std::string_view split) {
  const std::string name = path.filename().string();
  if (name.empty() || name.front() == '.' || is_tokenizer_file_name(name)) return false;
  return split.empty() || name.find(split) != std::string::npos;
}

std::vector<std::filesystem::path> list_directory(const std::string& spec, std::string_view split) {
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  for (std::filesystem::directory_iterator it(spec, error), end; !error && it != end; it.increment(error)) {
    if (name_matches(it->path(), split) && names_regular_file(it->path())) paths.push_back(it->path());
  }
  if (error) fail_spec(spec, split, "cannot list directory: " + error.message());
  if (paths.empty()) fail_spec(spec, split, "directory holds no token files");
  return paths;
}

std::vector<std::filesystem::path> expand_glob(const std::string& spec, std::string_view split) {
  GlobResult matches;
  const int status = ::glob(spec.c_str(), 0, nullptr, matches.get());
  if (status == GLOB_NOMATCH) fail_spec(spec, split, "no such file or directory, and no glob match");
  if (status != 0) fail_spec(spec, split, "glob failed (code " + std::to_string(status) + ")");
  std::vector<std::filesystem::path> paths;
  for (std::size_t i = 0; i < matches.get()->gl_pathc; ++i) {
    const std::filesystem::path path(matches.get()->gl_pathv[i]);
    if (name_matches(path, split) && names_regular_file(path)) paths.push_back(path);
  }
  if (paths.empty()) fail_spec(spec, split, "glob matches no token files");
  return paths;
}

}  // namespace

bool is_tokenizer_file_name(std::string_view name) {
  return name == "char_vocab.txt" || name == "encoder.json" || name == "vocab.bpe" || name == "tokenizer.json" ||
         name == "tokenizer_config.json";
}

std::vector<std::filesystem::path> expand_token_paths(const std::string& spec, std::string_view split) {
  if (spec.empty()) throw std::invalid_argument("token data: empty path spec");
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  const auto status = std::filesystem::status(spec, error);
  if (std::filesystem::is_regular_file(status)) {
    paths.emplace_back(spec);
  } else if (std::filesystem::is_directory(status)) {
    paths = list_directory(spec, split);
  } else if (std::filesystem::exists(status)) {
    fail_spec(spec, split, "neither a regular file nor a directory");
  } else {
    paths = expand_glob(spec, split);
  }
  // glob(3) sorts by the locale's collation; byte order is the same everywhere.
  std::sort(paths.begin(), paths.end(), [](const auto& a, const auto& b) { return a.native() < b.native(); });
  return paths;
}

TokenStream::TokenStream(std::vector<std::filesystem::path> paths, uint32_t vocab_size) {
  if (paths.empty()) throw std::invalid_argument("token stream: no token files given");
  std::sort(paths.begin(), paths.end(), [](const auto& a, const auto& b) { return a.native() < b.native(); });
  // A path listed twice would silently weight its tokens double.
  const auto repeated = std::adjacent_find(paths.begin(), paths.end());
  if (repeated != paths.end()) {
    throw std::invalid_argument("token stream: file '" + repeated->string() + "' is listed twice");
  }
  files_.reserve(paths.size());
  file_starts_.reserve(paths.size());
  for (auto& path : paths) {
    files_.emplace_back(std::move(path), vocab_size);
    file_starts_.push_back(total_tokens_);
    total_tokens_ += files_.back().size();
    // Files of one kind only: a stray raw .bin among llm.c shards is most likely not tokens at all.
    if (files_.back().format() != files_.front().format()) {
      throw std::invalid_argument("token data mixes formats: '" + files_.front().path().string() + "' is " +
                                  std::string(format_name(files_.front().format())) + ", '" +
                                  files_.back().path().string() + "' is " +
                                  std::string(format_name(files_.back().format())));
    }
  }
}

TokenStream TokenStream::from_spec(const std::string& spec, uint32_t vocab_size, std::string_view split) {
  return TokenStream(expand_token_paths(spec, split), vocab_size);
}

void TokenStream::read(uint64_t offset, std::size_t count, int64_t* out) const {
  uint64_t position = offset % total_tokens_;
  while (count > 0) {
    // Every file holds at least one token, so the starts strictly increase
    // and the last start not above `position` is the file that holds it.
    const auto next = std::upper_bound(file_starts_.begin(), file_starts_.end(), position);
    const auto index = static_cast<std::size_t>(next - file_starts_.begin()) - 1;
    const TokenFile& file = files_[index];
    const uint64_t within = position - file_starts_[index];
    const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(count, file.size() - within));
    file.read(within, chunk, out);
    out += chunk;
    count -= chunk;
    position += chunk;
    if (position == total_tokens_) position = 0;
  }
}

}  // namespace mygpt
