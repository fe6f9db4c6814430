#pragma once
// Checkpoints: one file holding everything needed to sample from or resume a run: metadata (model shape,
// tokenizer, step, the run's options) and named tensors (the state of every stateful part). The file is
// a safetensors file whose metadata also holds a checksum of every tensor and of the metadata, all
// verified on load. It is written durably (temporary file, fsync, rename, fsync of the folder), so a
// crash, a full disk or a power cut never leaves a partial file under a checkpoint's name, and it is
// always read onto the CPU first, so a checkpoint saved on one device loads on any other.
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/text_codec.h"
#include "model/gpt.h"
#include "trainer/stateful.h"

namespace mygpt {

struct CheckpointMeta {
  GptConfig model_config;
  TokenizerKind tokenizer_kind = TokenizerKind::none;
  std::string tokenizer_data;  // the character vocabulary, or the folder of GPT-2's files
  int64_t step = 0;            // optimizer steps completed
  std::string run_config;      // the training options, as "name=value" lines
  // A model fine-tuned on conversations: its chat template and special tokens' ids
  // (ChatFormat::record(), dataloader/chat_format.h); empty for any other model.
  std::string chat_format{};
};

struct Checkpoint {
  CheckpointMeta meta;
  // "<part>.<name>": "model.wte.weight", "optimizer.exp_avg.0.0", ...; as loaded, read-only views of the
  // mapped file (each verified against its checksum), which their readers copy from.
  StateDict tensors;
};

// Tensors are stored as they are given (on the CPU); the caller names them.
void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta, const StateDict& tensors);

// One tensor of a checkpoint as the ranks of a run hold it: its name, its whole shape and type, and how
// the writing rank gets it whole (trainer/checkpoint_entries.h makes them from the stateful parts).
struct CheckpointEntry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  // A collective when the tensor is spread over ranks: every rank calls it, in the same order. Returns the
  // whole tensor (any device) on the writing rank; what it returns elsewhere is not used.
  std::function<torch::Tensor()> whole_on_writer;
};

// The same file as save_checkpoint, streamed: every rank calls it with the same entries, which are
// produced one at a time in the file's order and written by the rank that `writes` alone, so that rank
// never holds more than one of them beyond its own state. A failed write on the writer lets the other
// ranks' collectives finish before it throws (OutputFileError), so no rank is left waiting.
void save_checkpoint_streamed(const std::filesystem::path& path, const CheckpointMeta& meta,
                              const std::vector<CheckpointEntry>& entries, bool writes);

// What a reader of a checkpoint needs of it: everything (to resume), or the model's weights alone
// (generate, eval, export, --init-from), whose readers neither read nor verify the other tensors, so a
// checkpoint damaged only in its optimizer state still samples, evaluates and exports.
enum class CheckpointParts { all, weights };

// Throws std::invalid_argument naming the file (and the tensor) for a missing, truncated, foreign or
// damaged one, in what `parts` reads (the metadata always). A failed write throws OutputFileError and
// leaves no file behind.
Checkpoint load_checkpoint(const std::filesystem::path& path, CheckpointParts parts = CheckpointParts::all);

// The entries of one part ("model", "optimizer", ...) without the "<part>." prefix, and the reverse.
StateDict part_state(const StateDict& tensors, const std::string& part);
void add_part_state(StateDict& tensors, const std::string& part, const StateDict& state);

// The model a checkpoint holds, built on the CPU.
Gpt model_from_checkpoint(const Checkpoint& checkpoint);

// "<dir>/ckpt_00001234.safetensors", named for what it is (not a torch.load pickle); zero-padded so that
// names sort by step.
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step);
// The step in a checkpoint's file name: "ckpt_<digits>.safetensors", or "ckpt_<digits>.pt" as builds before
// the rename wrote the same format; nullopt for any other name.
std::optional<int64_t> checkpoint_file_step(const std::filesystem::path& file);
// The checkpoint files in dir (both names), oldest first; of two files for one step the .safetensors
// comes last, so it is the one taken as newest and the .pt the one pruned first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);
// The newest checkpoint in dir (the highest step, whatever its name), if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);
// Removes the temporary files of checkpoint saves that were killed (only our own names); returns how many.
int remove_stale_checkpoint_temporaries(const std::filesystem::path& dir);
// A path that is a checkpoint file, or a directory whose newest checkpoint is taken.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path_or_dir);

}  // namespace mygpt
