// The Trainer's checkpoints: what a checkpoint holds of each stateful part, writing one (and pruning the
// older ones), and restoring a run from one (trainer/checkpoint.h has the file format).
#include <filesystem>
#include <stdexcept>
#include <string>

#include "trainer/checkpoint_entries.h"
#include "model/mixed_precision.h"
#include "trainer/trainer.h"

namespace mygpt {

std::vector<Trainer::NamedPart> Trainer::stateful_parts() {
  StatefulPart& weights = sharded_model_state_ ? static_cast<StatefulPart&>(*sharded_model_state_) : model_state_;
  std::vector<NamedPart> parts{{"model", "model weights", weights},
                               {"optimizer", "AdamW state", zero_ ? static_cast<StatefulPart&>(*zero_) : *p_.optimizer},
                               {"loader", "data loader (--data-order random)", loader_state_},
                               {"rng", "random generators", random_state_}};
  if (p_.muon) parts.push_back({"muon", "Muon momentum", *p_.muon});
  // A checkpoint of a bf16 or fp32 run has none: fp16 then starts from --loss-scale-init.
  if (scaler_) parts.push_back({"loss_scaler", "fp16 loss scale", *scaler_, /*fresh_if_absent=*/true});
  // A checkpoint of a run without --time-budget has none: this run's budget then starts whole.
  if (budget_) parts.push_back({"time_budget", "time budget's spent time", *budget_, /*fresh_if_absent=*/true});
  return parts;
}

std::vector<CheckpointEntry> Trainer::checkpoint_entries() {
  // Every rank walks the same parts in the same order (a sharded part's state_dict() is a collective); the
  // entries are then produced one at a time as the file is written (trainer/checkpoint_entries.h).
  std::vector<CheckpointEntry> entries;
  for (const NamedPart& named : stateful_parts()) {
    for (CheckpointEntry& entry : part_checkpoint_entries(named.name, named.part, comm_, p_.device)) {
      entries.push_back(std::move(entry));
    }
  }
  const torch::Tensor world = torch::tensor({static_cast<int64_t>(comm_.world_size())}, torch::kLong);
  entries.push_back({"world_size", torch::kLong, {1}, [world] { return world; }});
  return entries;
}

void Trainer::save_checkpoint_at(int64_t steps_done) {
  CheckpointMeta meta = p_.checkpoint_meta;
  meta.step = steps_done;
  const auto path = checkpoint_path(output_.out_dir(), steps_done);
  save_checkpoint_streamed(path, meta, checkpoint_entries(), output_.writes());
  if (!output_.writes()) return;
  output_.print("saved checkpoint " + path.string());
  prune_checkpoints();
}

void Trainer::prune_checkpoints() {
  const int64_t keep = options_.keep_checkpoints.value_or(0);
  if (keep <= 0) return;
  // Both names count (a run resumed from an old-named folder), oldest first.
  const std::vector<std::filesystem::path> found = list_checkpoints(output_.out_dir());
  for (size_t i = 0; i + static_cast<size_t>(keep) < found.size(); ++i) {
    std::filesystem::remove(found[i]);
  }
}

int64_t Trainer::restore(const Checkpoint& ckpt) {
  if (!(ckpt.meta.model_config == p_.model->config())) {
    throw std::invalid_argument(
        "the checkpoint's model shape differs from this run's (check --preset and model flags)");
  }
  if (ckpt.meta.step > options_.steps) {
    throw std::invalid_argument("the checkpoint is at step " + std::to_string(ckpt.meta.step) + ", beyond --steps " +
                                std::to_string(options_.steps) + ": raise --steps to continue it");
  }
  const auto world_entry = ckpt.tensors.find("world_size");
  if (world_entry == ckpt.tensors.end() || world_entry->second.numel() != 1) {
    throw std::invalid_argument("the checkpoint does not say how many ranks wrote it");
  }
  const int64_t saved_world = world_entry->second.item<int64_t>();
  const bool saved_muon = !part_state(ckpt.tensors, "muon").empty();
  if (saved_muon != (p_.muon != nullptr)) {
    throw std::invalid_argument(std::string("the checkpoint was trained with --optimizer ") +
                                (saved_muon ? "muon" : "adamw") + "; resume it with the same optimizer");
  }
  // A run may change precision when it resumes (a checkpoint moved to another kind of GPU): the fp16
  // loss scale is kept where both use it, starts afresh where only this run does (fresh_if_absent), and
  // is left where only the checkpoint's did.
  if (!scaler_ && !part_state(ckpt.tensors, "loss_scaler").empty()) {
    output_.print(std::string("note: the checkpoint trained in fp16; its loss scale is not used (this run: ") +
                  precision_description(precision()) + ")");
  }
  const int rank = comm_.rank(), world = comm_.world_size();
  bool reseeded = false;
  for (const NamedPart& named : stateful_parts()) {
    StateDict state = part_state(ckpt.tensors, named.name);
    if (state.empty() && named.fresh_if_absent) {
      output_.print("note: the checkpoint has no " + named.description + "; it starts afresh");
      continue;
    }
    if (!named.part.per_rank()) {
      named.part.load_state_dict(state);
    } else if (saved_world == world) {
      for (auto& [key, rows] : state) rows = rows[rank].clone();
      named.part.load_state_dict(state);
    } else if (named.part.on_other_world_size() == OnOtherWorldSize::reseed) {
      named.part.reseed(options_.seed + static_cast<uint64_t>(ckpt.meta.step) * 1000003ULL +
                        static_cast<uint64_t>(rank));
      reseeded = true;
    } else {
      throw std::invalid_argument("the checkpoint was written by " + std::to_string(saved_world) + " ranks; its " +
                                  named.description + " resumes only on the same number of ranks");
    }
  }
  if (reseeded) {
    output_.print("note: resuming " + std::to_string(saved_world) + "-rank checkpoint on " + std::to_string(world) +
                  " rank(s): data position kept, random streams re-seeded (not bit-identical)");
  }
  return ckpt.meta.step;
}


}  // namespace mygpt
