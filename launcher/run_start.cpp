#include "launcher/run_start.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "common/file_io.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"

namespace mygpt {
namespace fs = std::filesystem;
namespace {

std::string value_text(int64_t v) { return std::to_string(v); }
std::string value_text(bool v) { return v ? "true" : "false"; }
std::string value_text(double v) { return number_text(v); }

std::string shape_text(const GptConfig& c) {
  return std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) + " heads, width " +
         std::to_string(c.n_embd) + ", block " + std::to_string(c.block_size) + ", bias " + value_text(c.bias);
}

// A flag the user gave must say what the stored model is.
template <typename T>
void require_agreement(const Parsed<TrainFlags>& flags, const std::string& flag, const std::optional<T>& given,
                       const T& stored, const std::string& model) {
  if (flags.gave(flag) && given && *given != stored) {
    throw std::invalid_argument("--" + flag + " " + value_text(*given) + " differs from " + model + " (" +
                                value_text(stored) + ")");
  }
}

// The files a run writes in --out, by their names: only these are ever removed.
bool is_run_file(const fs::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  const bool checkpoint = checkpoint_file_step(entry.path()).has_value();  // either name
  return entry.is_regular_file() && (checkpoint || name == "metrics.jsonl" || name == "run.json");
}

// --resume auto: the newest checkpoint in `out` that loads; a damaged one is passed over with a note
// (a crash cannot leave one, since saves are atomic, but a disk or a copy can), so one bad file does not
// cost the whole run. All of them damaged: the newest one's error.
void resume_newest_intact(const fs::path& out, RunStart& start) {
  const std::vector<fs::path> found = list_checkpoints(out);
  std::optional<std::invalid_argument> newest_error;
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    try {
      start.model = open_stored_model(*it, CheckpointParts::all);
      start.resume = true;
      return;
    } catch (const std::invalid_argument& e) {
      if (!newest_error) newest_error = e;
      start.notes.push_back(std::string("note: passed over a damaged checkpoint: ") + e.what());
    }
  }
  if (newest_error) throw *newest_error;
}

}  // namespace

RunStart open_run_start(const Parsed<TrainFlags>& flags) {
  const RuntimeOptions& r = flags.config.runtime;
  const bool resume = !r.resume.empty() && r.resume != "none";
  if (resume && r.resume != "auto" && r.init_from) {
    throw std::invalid_argument(
        "give --init-from (a new run from stored weights) or --resume PATH (continue a run), not both "
        "(--resume auto with --init-from resumes --out's checkpoint when there is one)");
  }
  RunStart start;
  if (r.resume == "auto") {
    resume_newest_intact(flags.config.train.out, start);
    if (start.resume && r.init_from) {
      start.notes.push_back("--init-from " + *r.init_from + " not used: resuming the run's own checkpoint");
    }
  } else if (resume) {
    start.model = open_stored_model(r.resume, CheckpointParts::all);
    start.resume = true;
    if (start.model->hugging_face) {
      throw std::invalid_argument("--resume continues a checkpoint; '" + r.resume +
                                  "' is a Hugging Face folder (start from its weights with --init-from)");
    }
  }
  if (!start.resume && r.init_from) start.model = open_stored_model(*r.init_from);
  return start;
}

GptConfig resolve_model_config(const Parsed<TrainFlags>& flags, int64_t data_vocab_size, const RunStart& start) {
  const ModelShapeOptions& shape = flags.config.model;
  if (!start.model) return shape.resolve(data_vocab_size);
  const StoredModel& stored = *start.model;
  const std::string model = "the model of " + stored.description;
  GptConfig config = stored.config;
  // Each size flag given must say what the stored model has; the choices together must make its architecture.
#define MYGPT_SIZE_AGREES(Type, name, init, role, ...) \
  if constexpr (FieldRole::role == FieldRole::size) require_agreement(flags, field_flag_name(#name), shape.name, config.name, model);
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_SIZE_AGREES)
#undef MYGPT_SIZE_AGREES
  require_agreement(flags, "vocab-size", flags.config.data.vocab_size, config.vocab_size, model);
  GptConfig with_family_flags = config;
  shape.apply_to(with_family_flags, FieldRole::choice);
  if (!(with_family_flags == config)) {
    throw std::invalid_argument("the architecture flags make " + with_family_flags.architecture_text() + ", but " +
                                model + " is " + config.architecture_text());
  }
  if (flags.gave("preset")) {
    GptConfig from_flags = shape.resolve(config.vocab_size);
    from_flags.dropout = config.dropout;
    if (!(from_flags == config)) {
      throw std::invalid_argument("--preset " + shape.preset + " (" + shape_text(from_flags) + ") differs from " + model +
                                  " (" + shape_text(config) + ")");
    }
  }
  // The settings of a run (dropout): a resume keeps its checkpoint's, --init-from takes the flags' (or the preset's).
  const GptConfig preset = preset_config(shape.preset);
#define MYGPT_SETTING(Type, name, init, role, ...)                                                           \
  if constexpr (FieldRole::role == FieldRole::setting) {                                                    \
    if (start.resume) {                                                                                     \
      require_agreement(flags, field_flag_name(#name), shape.name, config.name, model);                     \
    } else {                                                                                                \
      config.name = shape.name.value_or(preset.name);                                                       \
    }                                                                                                       \
  }
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_SETTING)
#undef MYGPT_SETTING
  // Training pads a Hugging Face model's vocabulary as our GPT-2 presets do (50257 -> 50304).
  if (!start.resume && stored.hugging_face && !flags.gave("vocab-size")) config.vocab_size = padded_vocab_size(config.vocab_size);
  config.validate();
  return config;
}

void require_data_fits_model(const TrainingData& data, const RunStart& start, int64_t model_rows) {
  if (!start.model) return;
  const StoredModel& m = *start.model;
  const bool data_chars = data.tokenizer_kind == TokenizerKind::character;
  const bool model_chars = m.tokenizer_kind == TokenizerKind::character;
  if (data_chars && model_chars && data.tokenizer_data != m.tokenizer_data) {
    throw std::invalid_argument("the data's characters differ from those of the character model of " + m.description +
                                " (its data must have exactly its vocabulary)");
  }
  if (data_chars && !model_chars) {
    throw std::invalid_argument("character-level data cannot train the " + std::string(tokenizer_kind_name(m.tokenizer_kind)) +
                                "-tokenizer model of " + m.description + ": tokenize the text with --vocab DIR");
  }
  if (model_chars && !data_chars) {
    throw std::invalid_argument("the model of " + m.description +
                                " is character-level: train it on a text with its characters");
  }
  int64_t id_limit =
      data.tokenizer_kind == TokenizerKind::gpt2 ? static_cast<int64_t>(Gpt2BpeTokenizer::kVocabSize) : data.vocab_size;
  if (data.chat) id_limit = std::max(id_limit, data.chat->ids_end);
  if (id_limit > model_rows) {
    throw std::invalid_argument("the data's token ids reach " + std::to_string(id_limit - 1) + ", beyond the " +
                                std::to_string(model_rows) + "-token vocabulary of the model of " + m.description +
                                (data.chat ? " (the chat tokens take the ids after the tokenizer's, and --vocab-size "
                                             "leaves no rows for them)"
                                           : ""));
  }
}

std::vector<std::string> prepare_output_folder(const Parsed<TrainFlags>& flags, const RunStart& start, bool remove) {
  // A file, or a path that cannot be made, is bad input now, before any data is read.
  if (remove) create_output_directory(flags.config.train.out, "--out");
  if (start.resume) {
    flags.refuse("overwrite", "when resuming (it clears an earlier run's files for a fresh run)");
    return {};
  }
  const fs::path out = flags.config.train.out;
  std::vector<fs::path> earlier;
  std::error_code ec;
  if (fs::is_directory(out, ec)) {
    for (const auto& entry : fs::directory_iterator(out)) {
      if (is_run_file(entry)) earlier.push_back(entry.path());
    }
  }
  std::sort(earlier.begin(), earlier.end());
  std::vector<std::string> names;
  for (const auto& path : earlier) names.push_back(path.filename().string());
  if (earlier.empty()) return names;
  // --resume auto found no checkpoint: the files are those of a run stopped before its first one (a
  // requeued Slurm job, a killed first attempt), which this run starts again.
  const bool restart = flags.config.runtime.resume == "auto";
  if (!flags.config.runtime.overwrite && !restart) {
    std::string listed = names.front() + (names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "");
    throw std::invalid_argument("--out '" + out.string() + "' holds an earlier run (" + listed +
                                "): continue it with --resume auto, choose another --out, or give --overwrite to "
                                "delete its files");
  }
  if (remove) {
    for (const auto& path : earlier) fs::remove(path);
    remove_stale_checkpoint_temporaries(out);
    sync_directory(out);
  }
  return names;
}

}  // namespace mygpt
