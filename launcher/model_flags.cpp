#include "launcher/model_flags.h"

#include <limits>
#include <stdexcept>
#include <type_traits>

namespace mygpt {
namespace {

// The row of one field: its type says how the flag reads (a number or a switch as the table reads them; a
// choice or the soft-cap by model/'s own parse and names), its check kind adds the range.
template <typename Type>
void add_field_row(OptionTable<TrainFlags>& t, const char* field, std::optional<Type> ModelShapeOptions::*member,
                   FieldCheck check, const char* help) {
  if (std::string(help).empty()) return;  // set by the data (--vocab-size), not by a model flag
  auto& row = t.add(field_flag_name(field), &TrainFlags::model, member, help);
  if constexpr (std::is_enum_v<Type>) {
    row.text_form(parse_enum<Type>, [](const Type& v) { return std::string(enum_name(v)); });
  } else if constexpr (std::is_same_v<Type, std::optional<double>>) {
    row.text_form(parse_logit_softcap, logit_softcap_text);
  }
  if constexpr (std::is_arithmetic_v<Type> && !std::is_same_v<Type, bool>) {
    switch (check) {
      case FieldCheck::none:
        break;
      case FieldCheck::positive:
        row.check(positive);
        break;
      case FieldCheck::fraction:
        row.check(in_range(0, 1, /*hi_inclusive=*/false));
        break;
      case FieldCheck::above_one:
        row.check(in_open_range(1, std::numeric_limits<double>::infinity()));
        break;
      case FieldCheck::open_unit:
        row.check(in_open_range(0, 1));
        break;
    }
  } else if (check != FieldCheck::none) {
    throw std::logic_error("--" + field_flag_name(field) + ": a range check on a value that is not a number");
  }
  row.read_by(kPlanCommand);
}

}  // namespace

void add_model_flags(OptionTable<TrainFlags>& t) {
  using F = TrainFlags;
  using M = ModelShapeOptions;
  using R = RuntimeOptions;
  t.group("Model");
  t.add("preset", &F::model, &M::preset,
        "model shape: gpt2, gpt2-medium, gpt2-large, gpt2-xl (these bring the GPT-2 recipe's defaults), "
        "shakespeare-char, small, tiny; nanochat-d12 ... nanochat-d32 (nanochat's depth dial, any nanochat-dN), "
        "llama-small")
      .init("small")
      .check([](const std::string&, const std::string& name) { preset_config(name); })
      .read_by(kPlanCommand);
#define MYGPT_MODEL_FLAG(Type, name, init, role, check, place, phrase, shown, help) \
  add_field_row<Type>(t, #name, &M::name, FieldCheck::check, help);
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_MODEL_FLAG)
#undef MYGPT_MODEL_FLAG
  t.add("init-from", &F::runtime, &R::init_from,
        "start from these weights: a checkpoint (file or folder) or a Hugging Face folder (GPT-2, NanoChat, Llama, Qwen3). The model's shape "
        "comes from it (shape flags must agree); optimizer, step, schedule and data position start fresh. With "
        "--resume auto: only while --out holds no checkpoint (a requeued fine-tuning job resumes its own)")
      .read_by(kPlanCommand)
      .of_process();
}

}  // namespace mygpt
