#pragma once
// The options of `train` (and `plan`): one table, and the values that depend on the model, the device
// and the number of ranks, derived in one place.
#include <torch/torch.h>

#include <optional>
#include <string>
#include <string_view>

#include "dataloader/training_data.h"
#include "launcher/option_table.h"
#include "model/gpt_config.h"
#include "trainer/train_options.h"

namespace mygpt {

// What only the launcher reads.
struct RuntimeOptions {
  std::string device;
  int64_t threads{};                     // intra-op CPU threads per rank; 0: the node's cores divided by its ranks
  std::string resume;                    // "", "auto" or a checkpoint path
  std::optional<std::string> init_from;  // weights to start from: a checkpoint or a Hugging Face folder
  bool overwrite{};                      // a fresh run may delete an earlier run's files in --out
  double comm_timeout{};                 // seconds before a stuck collective or rendezvous ends the job; 0: no limit
  std::string rendezvous;                // how ranks started without MPI meet: "tcp" or "file:DIR"
  bool verbose{};                        // LibTorch's own warnings during the rendezvous are printed too
  bool keep_freed_memory{};              // CPU: malloc keeps what a step frees for the next (memory_reuse.h)
};

// What only `plan` reads: the world and the device memory to size a run for.
struct PlanOptions {
  int64_t ranks{};      // 0: the world size under a launcher, else 1
  double gpu_memory{};  // GiB per GPU to check the estimate against; 0: the device's own, if any
};

struct TrainFlags {
  DataOptions data;
  ModelShapeOptions model;
  TrainOptions train;
  RuntimeOptions runtime;
  PlanOptions plan;
};

const OptionTable<TrainFlags>& train_flag_table();
// The group of the rows only `plan` reads (--ranks, --gpu-memory); train's --help leaves it out.
inline constexpr std::string_view kPlanOnlyGroup = "Plan only (mygpt-ddp plan)";
// `plan` accepts train's whole command line (a user pastes their train flags after it) but its --help
// lists only the rows marked .read_by(kPlanCommand): those that change the plan.
inline constexpr const char* kPlanCommand = "plan";
inline bool shown_in_train_help(const OptionRow<TrainFlags>& row) { return row.group() != kPlanOnlyGroup; }
inline bool shown_in_plan_help(const OptionRow<TrainFlags>& row) { return row.is_read_by(kPlanCommand); }

// The training options with the derived values filled in: --seq-len 0 becomes the block size, the
// accumulation comes from --total-batch-tokens when that is set, and precision auto becomes bf16 on
// CUDA (fp32 elsewhere). Throws std::invalid_argument for settings that contradict each other, and
// for flags given that have no effect (--eval-steps with --eval-every 0, --hellaswag-every without
// --hellaswag, --sample-prompt with --sample-every 0, ...).
TrainOptions resolve_train_options(const Parsed<TrainFlags>& flags, const GptConfig& model, const torch::Device& device,
                                   int world_size);

}  // namespace mygpt
