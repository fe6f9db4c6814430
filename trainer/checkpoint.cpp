#include "trainer/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace mygpt {
namespace {

constexpr const char* kFormatTag = "mygpt-ddp checkpoint";
constexpr int64_t kFormatVersion = 1;

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

void save_checkpoint(const std::filesystem::path& path, Gpt& model, const AdamW* optimizer,
                     const CheckpointMeta& meta, const std::map<std::string, torch::Tensor>& extra) {
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kFormatTag)));
  archive.write("format_version", c10::IValue(kFormatVersion));
  archive.write("model_config", c10::IValue(meta.model_config.to_text()));
  archive.write("tokenizer_kind", c10::IValue(meta.tokenizer_kind));
  archive.write("tokenizer_data", c10::IValue(meta.tokenizer_data));
  archive.write("step", c10::IValue(meta.step));
  archive.write("run_config", c10::IValue(meta.run_config));

  torch::serialize::OutputArchive model_archive;
  model->save(model_archive);
  archive.write("model", model_archive);
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer->save_state(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }
  std::string extra_names;
  for (const auto& [name, tensor] : extra) {
    archive.write("extra." + name, tensor);
    extra_names += name + "\n";
  }
  archive.write("extra_names", c10::IValue(extra_names));

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

LoadedCheckpoint load_checkpoint(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) throw std::invalid_argument("checkpoint '" + path.string() + "' does not exist");
  if (!std::filesystem::is_regular_file(path)) {
    throw std::invalid_argument("checkpoint '" + path.string() + "' is not a file");
  }
  LoadedCheckpoint ckpt;
  try {
    ckpt.archive.load_from(path.string(), torch::kCPU);
  } catch (const c10::Error&) {
    throw std::invalid_argument("checkpoint '" + path.string() + "' is truncated or not a checkpoint file");
  }
  try {
    if (read_string(ckpt.archive, "format") != kFormatTag) throw std::invalid_argument("has a foreign format tag");
    const int64_t version = read_int(ckpt.archive, "format_version");
    if (version != kFormatVersion) {
      throw std::invalid_argument("has format version " + std::to_string(version) + ", this build reads " +
                                  std::to_string(kFormatVersion));
    }
    ckpt.meta.model_config = GptConfig::from_text(read_string(ckpt.archive, "model_config"));
    ckpt.meta.tokenizer_kind = read_string(ckpt.archive, "tokenizer_kind");
    ckpt.meta.tokenizer_data = read_string(ckpt.archive, "tokenizer_data");
    ckpt.meta.step = read_int(ckpt.archive, "step");
    ckpt.meta.run_config = read_string(ckpt.archive, "run_config");
    ckpt.model = Gpt(ckpt.meta.model_config);
    torch::serialize::InputArchive model_archive;
    if (!ckpt.archive.try_read("model", model_archive)) throw std::invalid_argument("lacks the model weights");
    ckpt.model->load(model_archive);
    std::string names = read_string(ckpt.archive, "extra_names");
    for (size_t start = 0, end; (end = names.find('\n', start)) != std::string::npos; start = end + 1) {
      const std::string name = names.substr(start, end - start);
      torch::Tensor t;
      if (!ckpt.archive.try_read("extra." + name, t)) throw std::invalid_argument("lacks state '" + name + "'");
      ckpt.extra[name] = t;
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("checkpoint '" + path.string() + "' is not a mygpt-ddp checkpoint: it " + e.what());
  } catch (const c10::Error& e) {
    throw std::invalid_argument("checkpoint '" + path.string() + "' is damaged: " +
                                std::string(e.what_without_backtrace()).substr(0, 200));
  }
  return ckpt;
}

void load_optimizer_state(LoadedCheckpoint& checkpoint, AdamW& optimizer) {
  torch::serialize::InputArchive optimizer_archive;
  if (!checkpoint.archive.try_read("optimizer", optimizer_archive)) {
    throw std::invalid_argument("checkpoint holds no optimizer state, so training cannot resume from it");
  }
  optimizer.load_state(optimizer_archive);
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
    if (!latest) throw std::invalid_argument("directory '" + path_or_dir.string() + "' holds no checkpoint (ckpt_*.pt)");
    return *latest;
  }
  return path_or_dir;
}

}  // namespace mygpt
