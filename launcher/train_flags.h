#pragma once
// The options of `train` (and `plan`): one table. The values that depend on the model, the data, the device
// and the number of ranks are derived in launcher/run_plan.h.
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

// Its rows are defined per group (launcher/train_flag_groups.h), and the Model group here; option names used
// in code (gave, refuse, the rows' declared dependencies) are checked against them.
const OptionTable<TrainFlags>& train_flag_table();
// The group of what a run reads (launcher/data_flags.cpp): its declared refusals are judged on the data
// options as resolved (run_plan.h's resolve_data_options), the others' on the training options.
inline constexpr std::string_view kDataGroup = "Data";
// The group of the rows only `plan` reads (--ranks, --gpu-memory); train's --help leaves it out.
inline constexpr std::string_view kPlanOnlyGroup = "Plan only (mygpt-ddp plan)";
// `plan` accepts train's whole command line (a user pastes their train flags after it) but its --help
// lists only the rows marked .read_by(kPlanCommand): those that change the plan.
inline constexpr const char* kPlanCommand = "plan";
inline bool shown_in_train_help(const OptionRow<TrainFlags>& row) { return row.group() != kPlanOnlyGroup; }
inline bool shown_in_plan_help(const OptionRow<TrainFlags>& row) { return row.is_read_by(kPlanCommand); }

}  // namespace mygpt
