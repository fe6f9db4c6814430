#pragma once
// What a Hugging Face export refuses before it writes a file, so that nothing of the model is left out of the
// folder with success (issue 66: the exports walked their own tensor maps, and a parameter or a config field
// they did not know was dropped with exit 0). Both exports (model/hf/hf_gpt2.h, model/hf/hf_family.h) call it.
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/gpt_config.h"
#include "model/hf/hf_folder.h"

namespace mygpt {

// What a format that holds only the config fields named in `kept` would lose of `config`: each other field
// whose value (as run.json shows it) departs from the default config's once the kept fields are copied into
// it, as "name=value", in the field table's order (model/gpt_config_fields.h). A field added to the table is
// then lost to every format that does not name it, until it does. A name in `kept` that is no field is
// std::logic_error.
std::vector<std::string> config_fields_lost_without(const GptConfig& config, const std::vector<std::string>& kept);

// One std::invalid_argument line naming `target` (the transformers class) and the parameter or the fields: a
// parameter of the model, walked in the model's own list, with rows that no map of `maps` carries (a
// parameter added to the model and not to the mapping), or config fields that depart from the default where
// `target` has no place for them (`carried`: the fields its config.json's keys, its class or its tensors hold).
void refuse_what_export_drops(const Gpt& model, const std::vector<HfTensorMap>& maps,
                              const std::vector<std::string>& carried, const std::string& target);

}  // namespace mygpt
