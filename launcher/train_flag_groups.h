#pragma once
// The groups of train's options table (launcher/train_flags.cpp assembles them in --help's order), each in
// a file of its name, and the presets' recipes as tables.
#include "launcher/option_table.h"
#include "launcher/train_flags.h"

namespace mygpt {

void add_data_flags(OptionTable<TrainFlags>& t);      // launcher/data_flags.cpp
void add_training_flags(OptionTable<TrainFlags>& t);  // launcher/training_flags.cpp
void add_run_flags(OptionTable<TrainFlags>& t);       // launcher/run_flags.cpp
void add_plan_flags(OptionTable<TrainFlags>& t);      // launcher/plan_flags.cpp
// The recipes that presets bring (GPT-2's, nanoGPT's shakespeare-char), once every row is in the table.
void add_preset_recipes(OptionTable<TrainFlags>& t);  // launcher/preset_recipes.cpp

}  // namespace mygpt
