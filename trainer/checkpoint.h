#pragma once
// Checkpoints: one file holding everything needed to sample from or resume a run. Files are written
// to a temporary name and renamed, so a crash never leaves a partial file where a good one was, and
// are always read onto the CPU first so that a checkpoint saved on one device loads on any other.
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "model/gpt.h"
#include "trainer/adamw.h"

namespace mygpt {

struct CheckpointMeta {
  GptConfig model_config;
  std::string tokenizer_kind;  // "char" (tokenizer_data = the vocabulary) or "gpt2"
  std::string tokenizer_data;
  int64_t step = 0;            // optimizer steps completed
  std::string run_config;      // the training options, as text
};

struct LoadedCheckpoint {
  CheckpointMeta meta;
  Gpt model{nullptr};                          // on the CPU
  torch::serialize::InputArchive archive;      // for the optimizer and the extra state
  std::map<std::string, torch::Tensor> extra;  // loader positions, RNG states, ...
};

// extra holds named tensors (data loader state, RNG states) saved next to the model.
void save_checkpoint(const std::filesystem::path& path, Gpt& model, const AdamW* optimizer,
                     const CheckpointMeta& meta, const std::map<std::string, torch::Tensor>& extra = {});

// Throws std::invalid_argument for a missing, truncated or foreign file.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& path);
void load_optimizer_state(LoadedCheckpoint& checkpoint, AdamW& optimizer);

// "<dir>/ckpt_00001234.pt": zero-padded so that names sort by step.
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step);
// The newest checkpoint in dir, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);
// A path that is a checkpoint file, or a directory whose newest checkpoint is taken.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path_or_dir);

}  // namespace mygpt
