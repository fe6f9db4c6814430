#include "launcher/train_flags.h"

#include "launcher/model_flags.h"
#include "launcher/shared_flags.h"
#include "launcher/train_flag_groups.h"

namespace mygpt {
namespace {

OptionTable<TrainFlags> make_table() {
  OptionTable<TrainFlags> t;
  add_data_flags(t);
  add_model_flags(t);
  add_training_flags(t);
  add_run_flags(t);
  add_plan_flags(t);
  add_preset_recipes(t);
  t.check_declarations();
  return t;
}

}  // namespace

const OptionTable<TrainFlags>& train_flag_table() {
  static const OptionTable<TrainFlags> table = make_table();
  return table;
}

}  // namespace mygpt
