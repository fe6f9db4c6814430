// The rows only `plan` reads: the world and the device memory it sizes a run for.
#include "launcher/train_flag_groups.h"

namespace mygpt {

void add_plan_flags(OptionTable<TrainFlags>& t) {
  using F = TrainFlags;
  using P = PlanOptions;
  t.group(std::string(kPlanOnlyGroup));
  t.add("ranks", &F::plan, &P::ranks, "ranks to plan for; 0: the world size under a launcher, else 1")
      .init(0)
      .check(non_negative)
      .read_by(kPlanCommand)
      .of_process();
  t.add("gpu-memory", &F::plan, &P::gpu_memory,
        "GiB of memory per GPU to check the estimate against (and find the largest micro-batch that fits); 0: "
        "the GPU's own with --device cuda")
      .init(0.0)
      .check(non_negative)
      .read_by(kPlanCommand)
      .of_process();
}

}  // namespace mygpt
