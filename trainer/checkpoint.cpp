#include "trainer/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "trainer/stateful_parts.h"

namespace mygpt {
namespace {

constexpr const char* kFormatTag = "mygpt-ddp checkpoint";
constexpr int64_t kFormatVersion = 2;

std::string read_string(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isString()) throw std::invalid_argument("lacks '" + key + "'");
  return value.toStringRef();
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isInt()) throw std::invalid_argument("lacks '" + key + "'");
  return value.toInt();
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta, const StateDict& tensors) {
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kFormatTag)));
  archive.write("format_version", c10::IValue(kFormatVersion));
  archive.write("model_config", c10::IValue(meta.model_config.to_text()));
  archive.write("tokenizer_kind", c10::IValue(std::string(tokenizer_kind_name(meta.tokenizer_kind))));
  archive.write("tokenizer_data", c10::IValue(meta.tokenizer_data));
  archive.write("step", c10::IValue(meta.step));
  archive.write("run_config", c10::IValue(meta.run_config));
  std::string names;
  for (const auto& [name, tensor] : tensors) {
    archive.write("tensor." + name, tensor);
    names += name + "\n";
  }
  archive.write("tensor_names", c10::IValue(names));

  std::filesystem::create_directories(path.parent_path().empty() ? "." : path.parent_path());
  const auto tmp = std::filesystem::path(path.string() + ".tmp");
  try {
    archive.save_to(tmp.string());
    std::filesystem::rename(tmp, path);  // atomic on POSIX: readers see the old file or the new one
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
}

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) throw std::invalid_argument("checkpoint '" + path.string() + "' does not exist");
  if (!std::filesystem::is_regular_file(path)) {
    throw std::invalid_argument("checkpoint '" + path.string() + "' is not a file");
  }
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path.string(), torch::kCPU);
  } catch (const c10::Error&) {
    throw std::invalid_argument("checkpoint '" + path.string() + "' is truncated or not a checkpoint file");
  }
  Checkpoint ckpt;
  try {
    if (read_string(archive, "format") != kFormatTag) throw std::invalid_argument("has a foreign format tag");
    const int64_t version = read_int(archive, "format_version");
    if (version != kFormatVersion) {
      throw std::invalid_argument("has format version " + std::to_string(version) + ", this build reads " +
                                  std::to_string(kFormatVersion));
    }
    ckpt.meta.model_config = GptConfig::from_text(read_string(archive, "model_config"));
    ckpt.meta.tokenizer_kind = parse_tokenizer_kind(read_string(archive, "tokenizer_kind"));
    ckpt.meta.tokenizer_data = read_string(archive, "tokenizer_data");
    ckpt.meta.step = read_int(archive, "step");
    ckpt.meta.run_config = read_string(archive, "run_config");
    const std::string names = read_string(archive, "tensor_names");
    for (size_t start = 0, end; (end = names.find('\n', start)) != std::string::npos; start = end + 1) {
      const std::string name = names.substr(start, end - start);
      torch::Tensor t;
      if (!archive.try_read("tensor." + name, t)) throw std::invalid_argument("lacks tensor '" + name + "'");
      ckpt.tensors[name] = t;
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("checkpoint '" + path.string() + "' is not a mygpt-ddp checkpoint: it " + e.what());
  } catch (const c10::Error& e) {
    throw std::invalid_argument("checkpoint '" + path.string() +
                                "' is damaged: " + std::string(e.what_without_backtrace()).substr(0, 200));
  }
  return ckpt;
}

StateDict part_state(const StateDict& tensors, const std::string& part) {
  StateDict state;
  const std::string prefix = part + ".";
  for (auto it = tensors.lower_bound(prefix); it != tensors.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    state[it->first.substr(prefix.size())] = it->second;
  }
  return state;
}

void add_part_state(StateDict& tensors, const std::string& part, const StateDict& state) {
  for (const auto& [key, tensor] : state) tensors[part + "." + key] = tensor;
}

Gpt model_from_checkpoint(const Checkpoint& checkpoint) {
  Gpt model(checkpoint.meta.model_config);
  ModelState(model).load_state_dict(part_state(checkpoint.tensors, "model"));
  return model;
}

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt_%08lld.pt", static_cast<long long>(step));
  return dir / name;
}

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.rfind("ckpt_", 0) == 0 && entry.path().extension() == ".pt") {
      found.push_back(entry.path());
    }
  }
  if (found.empty()) return std::nullopt;
  return *std::max_element(found.begin(), found.end());
}

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path_or_dir) {
  if (std::filesystem::is_directory(path_or_dir)) {
    auto latest = latest_checkpoint(path_or_dir);
    if (!latest)
      throw std::invalid_argument("directory '" + path_or_dir.string() + "' holds no checkpoint (ckpt_*.pt)");
    return *latest;
  }
  return path_or_dir;
}

}  // namespace mygpt
