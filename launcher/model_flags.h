#pragma once
// The Model group of `train` (and `plan`): --preset, a flag per row of the model config's field table
// (model/gpt_config_fields.h) that overrides the preset, and --init-from.
#include "launcher/train_flags.h"

namespace mygpt {

void add_model_flags(OptionTable<TrainFlags>& table);

}  // namespace mygpt
