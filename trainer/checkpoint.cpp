#include "trainer/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <memory>
#include <set>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/checksum.h"
#include "common/file_io.h"
#include "common/strprintf.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "model/hf/safetensors_file.h"
#include "trainer/stateful_parts.h"

namespace mygpt {
namespace {

// A checkpoint is a safetensors file (so Python's `safetensors` reads it too). Its metadata holds the
// run's description and an XXH64 checksum of every tensor's bytes and of the metadata itself; loading
// verifies them all, so a damaged file is an error naming the tensor instead of a run on bad weights.
constexpr const char* kFormatTag = "mygpt-ddp checkpoint";
constexpr const char* kFormatVersion = "3";
const std::string kChecksumPrefix = "checksum.";
const std::string kMetadataChecksum = "metadata_checksum";


uint64_t tensor_checksum(const torch::Tensor& cpu_contiguous) {
  return xxh64(cpu_contiguous.data_ptr(), cpu_contiguous.nbytes());
}

// Over every metadata entry but its own checksum, in key order (std::map), each as "key=value\0".
uint64_t metadata_checksum(const std::map<std::string, std::string>& metadata) {
  std::string all;
  for (const auto& [key, value] : metadata) {
    if (key != kMetadataChecksum) all += key + "=" + value + '\0';
  }
  return xxh64(all);
}

const std::string& field(const std::map<std::string, std::string>& metadata, const std::string& key) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw std::invalid_argument("lacks '" + key + "'");
  return it->second;
}

int64_t integer_field(const std::map<std::string, std::string>& metadata, const std::string& key) {
  const std::string& text = field(metadata, key);
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 0) throw std::invalid_argument("has a bad '" + key + "'");
  return value;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The metadata's claims against the tensors' recorded shapes (the header, which the reader has already
// checked against the file's size): before any tensor is read or a model of the claimed shape is built,
// so a checkpoint cannot make the program allocate more than it holds.
void check_claims(const SafetensorsReader& reader, const CheckpointMeta& meta, CheckpointParts parts) {
  const GptConfig& c = meta.model_config;
  const std::string claimed = strprintf("its model_config (%lld layers, width %lld, vocabulary %lld, block %lld)",
                                        static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
                                        static_cast<long long>(c.vocab_size), static_cast<long long>(c.block_size));
  std::set<std::string> expected;
  for (const auto& [parameter, shape] : parameter_shapes(c)) {
    const std::string name = "model." + parameter;
    if (!reader.has(name)) throw std::invalid_argument(claimed + " needs tensor '" + name + "', which it lacks");
    const SafetensorsTensorInfo& info = reader.info(name);
    if (info.shape != shape || info.dtype != torch::kFloat) {
      throw std::invalid_argument(claimed + " needs tensor '" + name + "' as F32 " + shape_text(shape) +
                                  ", the file holds " + info.dtype_name + " " + shape_text(info.shape));
    }
    expected.insert(name);
  }
  for (const std::string& name : reader.names()) {
    if (name.rfind("model.", 0) == 0 && !expected.count(name)) {
      throw std::invalid_argument("holds tensor '" + printable_name(name) + "', which " + claimed + " has no place for");
    }
  }
  if (meta.tokenizer_kind == TokenizerKind::character) {
    const int64_t characters = make_text_codec(TokenizerKind::character, meta.tokenizer_data)->vocab_size();
    if (characters > c.vocab_size) {
      throw std::invalid_argument("its character vocabulary has " + std::to_string(characters) +
                                  " characters, more than the " + std::to_string(c.vocab_size) + " rows of its model");
    }
  }
  if (meta.tokenizer_kind == TokenizerKind::gpt2 && c.vocab_size < static_cast<int64_t>(Gpt2BpeTokenizer::kVocabSize)) {
    throw std::invalid_argument("its tokenizer is GPT-2's (" + std::to_string(static_cast<int64_t>(Gpt2BpeTokenizer::kVocabSize)) + " tokens) but its model has " +
                                std::to_string(c.vocab_size) + " vocabulary rows");
  }
  // The optimizer cannot have taken more steps than the run (a reader of the weights alone leaves the
  // optimizer's tensors unread: they may be the damaged part).
  const std::string steps_name = "optimizer.steps_taken";
  if (parts == CheckpointParts::all && reader.has(steps_name)) {
    const torch::Tensor steps = reader.tensor(steps_name);
    if (steps.numel() != 1 || steps.scalar_type() != torch::kLong) {
      throw std::invalid_argument("tensor '" + steps_name + "' is not one integer");
    }
    if (steps.item<int64_t>() > meta.step) {
      throw std::invalid_argument("it claims step " + std::to_string(meta.step) + " but its optimizer took " +
                                  std::to_string(steps.item<int64_t>()) + " steps");
    }
  }
}

}  // namespace

namespace {

std::map<std::string, std::string> described_metadata(const CheckpointMeta& meta) {
  std::map<std::string, std::string> metadata = {
      {"format", kFormatTag},
      {"format_version", kFormatVersion},
      {"model_config", meta.model_config.to_text()},
      {"tokenizer_kind", std::string(tokenizer_kind_name(meta.tokenizer_kind))},
      {"tokenizer_data", meta.tokenizer_data},
      {"step", std::to_string(meta.step)},
      {"run_config", meta.run_config},
  };
  if (!meta.chat_format.empty()) metadata["chat_format"] = meta.chat_format;
  return metadata;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta, const StateDict& tensors) {
  std::vector<CheckpointEntry> entries;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw std::invalid_argument("cannot save checkpoint: tensor '" + name + "' is undefined");
    entries.push_back({name, tensor.scalar_type(), tensor.sizes().vec(), [t = tensor] { return t; }});
  }
  save_checkpoint_streamed(path, meta, entries, /*writes=*/true);
}

void save_checkpoint_streamed(const std::filesystem::path& path, const CheckpointMeta& meta,
                              const std::vector<CheckpointEntry>& entries, bool writes) {
  // The checksums are known only once each tensor has passed: the header is written with placeholders of
  // their length (16 hex digits) and written again at the end (SafetensorsStreamWriter).
  std::map<std::string, std::string> metadata = described_metadata(meta);
  std::vector<SafetensorsLayoutEntry> layout;
  std::map<std::string, const CheckpointEntry*> by_name;
  for (const CheckpointEntry& entry : entries) {
    metadata[kChecksumPrefix + entry.name] = hex64(0);
    layout.push_back({entry.name, entry.dtype, entry.shape});
    by_name.emplace(entry.name, &entry);
  }
  metadata[kMetadataChecksum] = hex64(0);
  std::unique_ptr<SafetensorsStreamWriter> writer;
  // The writer's first failure, kept while the other ranks' collectives go on.
  std::exception_ptr failure;
  if (writes) {
    try {
      create_output_directory(path.parent_path().empty() ? "." : path.parent_path(), "checkpoint folder");
      writer = std::make_unique<SafetensorsStreamWriter>(path, layout, metadata);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  for (const SafetensorsLayoutEntry& place : safetensors_data_order(layout)) {
    const CheckpointEntry& entry = *by_name.at(place.name);
    torch::Tensor whole = entry.whole_on_writer();
    if (!writer || failure) continue;
    try {
      const torch::Tensor cpu = whole.to(torch::kCPU).contiguous();
      whole = torch::Tensor();  // a device tensor's host copy is all that is kept
      metadata[kChecksumPrefix + entry.name] = hex64(tensor_checksum(cpu));
      writer->write_next(cpu);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (!writes) return;
  try {
    if (failure) std::rethrow_exception(failure);
    metadata[kMetadataChecksum] = hex64(metadata_checksum(metadata));
    writer->finish(metadata);
  } catch (const OutputFileError& e) {
    throw OutputFileError(std::string("cannot save checkpoint: ") + e.what());
  }
}

Checkpoint load_checkpoint(const std::filesystem::path& path, CheckpointParts parts) {
  require_regular_file(path, "checkpoint");
  const std::string name = "checkpoint '" + path.string() + "'";
  std::optional<SafetensorsReader> reader;
  try {
    reader = SafetensorsReader::open(path);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(name + " is truncated, damaged or not a checkpoint file (" + e.what() + ")");
  }
  const auto& metadata = reader->metadata();
  Checkpoint ckpt;
  try {
    if (field(metadata, "format") != kFormatTag) throw std::invalid_argument("has a foreign format tag");
    if (field(metadata, "format_version") != kFormatVersion) {
      throw std::invalid_argument("has format version " + printable_name(field(metadata, "format_version")) +
                                  ", this build reads " + kFormatVersion);
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(name + " is not a mygpt-ddp checkpoint: it " + e.what());
  }
  try {
    if (field(metadata, kMetadataChecksum) != hex64(metadata_checksum(metadata))) {
      throw std::invalid_argument("its metadata fails its checksum");
    }
    ckpt.meta.model_config = GptConfig::from_text(field(metadata, "model_config"));
    ckpt.meta.tokenizer_kind = parse_tokenizer_kind(field(metadata, "tokenizer_kind"));
    ckpt.meta.tokenizer_data = field(metadata, "tokenizer_data");
    ckpt.meta.step = integer_field(metadata, "step");
    ckpt.meta.run_config = field(metadata, "run_config");
    // Checkpoints of plain training (and of builds before fine-tuning) have none.
    if (const auto chat = metadata.find("chat_format"); chat != metadata.end()) ckpt.meta.chat_format = chat->second;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(name + " is damaged: " + e.what());
  }
  try {
    check_claims(*reader, ckpt.meta, parts);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(name + " does not hold what its metadata claims: " + e.what());
  }
  const auto wanted = [parts](const std::string& tensor_name) {
    return parts == CheckpointParts::all || tensor_name.rfind("model.", 0) == 0;
  };
  try {
    for (const std::string& tensor_name : reader->names()) {
      if (!wanted(tensor_name)) continue;
      // Every tensor stays where the file is mapped (read-only): a reader copies what it keeps into its own
      // storage (a model its weights, a sharded optimizer its own slices of each moment), so no rank holds
      // an anonymous copy of the whole checkpoint, and the ranks of a machine share the file's pages.
      torch::Tensor t = reader->view(tensor_name);
      const auto sum = metadata.find(kChecksumPrefix + tensor_name);
      if (sum == metadata.end())
        throw std::invalid_argument("tensor '" + printable_name(tensor_name) + "' has no checksum");
      if (sum->second != hex64(tensor_checksum(t))) {
        throw std::invalid_argument("tensor '" + printable_name(tensor_name) + "' fails its checksum");
      }
      ckpt.tensors[tensor_name] = std::move(t);
    }
    for (const auto& [key, value] : metadata) {
      const std::string tensor_name = key.substr(std::min(key.size(), kChecksumPrefix.size()));
      if (key.rfind(kChecksumPrefix, 0) == 0 && wanted(tensor_name) && !reader->has(tensor_name)) {
        throw std::invalid_argument("tensor '" + printable_name(tensor_name) + "' is missing");
      }
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(name + " is damaged: " + e.what());
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
  // Every weight is overwritten from the file: no random initialization to draw first.
  Gpt model(checkpoint.meta.model_config, WeightInit::for_loading);
  ModelState(model).load_state_dict(part_state(checkpoint.tensors, "model"));
  return model;
}

// "ckpt_<step>.safetensors"; builds before it named the same format ".pt", which is still read.
constexpr std::string_view kCheckpointPrefix = "ckpt_";
constexpr std::string_view kCheckpointExtension = ".safetensors";
constexpr std::string_view kOldCheckpointExtension = ".pt";

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step) {
  return dir / strprintf("ckpt_%08lld.safetensors", static_cast<long long>(step));
}

std::optional<int64_t> checkpoint_file_step(const std::filesystem::path& file) {
  const std::string extension = file.extension().string();
  if (extension != kCheckpointExtension && extension != kOldCheckpointExtension) return std::nullopt;
  const std::string stem = file.stem().string();
  if (stem.rfind(kCheckpointPrefix, 0) != 0) return std::nullopt;
  const std::string digits = stem.substr(kCheckpointPrefix.size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir) {
  struct Found {
    int64_t step;
    bool new_name;
    std::filesystem::path path;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto step = checkpoint_file_step(entry.path());
    if (step && entry.is_regular_file(ec)) {
      found.push_back({*step, entry.path().extension() == kCheckpointExtension, entry.path()});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return std::tie(a.step, a.new_name) < std::tie(b.step, b.new_name); });
  std::vector<std::filesystem::path> paths;
  for (auto& f : found) paths.push_back(std::move(f.path));
  return paths;
}

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found = list_checkpoints(dir);
  if (found.empty()) return std::nullopt;
  return std::move(found.back());
}

int remove_stale_checkpoint_temporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // Our own names only: AtomicFileWriter's ".ckpt_*.tmp.<pid>" (either extension), and the
    // "ckpt_*.pt.tmp" of older builds.
    const bool ours = is_atomic_writer_temporary(entry.path(), "ckpt_") ||
                      (name.rfind("ckpt_", 0) == 0 && name.size() > 7 && name.ends_with(".pt.tmp"));
    if (ours && entry.is_regular_file(ec) && std::filesystem::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path_or_dir) {
  if (std::filesystem::is_directory(path_or_dir)) {
    auto latest = latest_checkpoint(path_or_dir);
    if (!latest) {
      throw std::invalid_argument("directory '" + path_or_dir.string() +
                                  "' holds no checkpoint (ckpt_*.safetensors, or ckpt_*.pt of older builds)");
    }
    return *latest;
  }
  return path_or_dir;
}

}  // namespace mygpt
