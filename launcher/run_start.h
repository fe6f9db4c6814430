#pragma once
// How a training run starts: afresh; from stored weights (--init-from: one of our checkpoints or a
// Hugging Face GPT-2 folder; only the weights are taken, the optimizer, step, schedule and data
// position start fresh); or resumed (--resume: everything from a checkpoint). A stored model decides
// the model's shape, and the data's vocabulary must fit it. And where a run writes: a fresh run does
// not write over an earlier run's files unless told to (--overwrite).
#include <optional>

#include "dataloader/training_data.h"
#include "launcher/inference_model.h"
#include "launcher/train_flags.h"

namespace mygpt {

struct RunStart {
  std::optional<StoredModel> model;  // none: a fresh model
  bool resume = false;               // continue model's checkpoint, rather than take its weights only
  std::vector<std::string> notes;    // lines for the log: damaged checkpoints passed over, --init-from unused
};

// The checkpoint --resume names, or with "auto" the newest intact one in --out (newer damaged ones are
// passed over with a note each; all damaged: the newest one's error). Without one to resume, the
// weights of --init-from, if given (--init-from with --resume auto: a requeued fine-tuning job starts
// from the weights once and resumes its own checkpoints after that), else a fresh run. --init-from with
// a --resume path is std::invalid_argument.
RunStart open_run_start(const Parsed<TrainFlags>& flags);

// The model's shape: a fresh run's from the flags and the data's vocabulary; otherwise the stored
// model's, with which every shape flag given (--preset, --n-layer, --n-head, --n-embd, --block-size,
// --bias, --vocab-size) must agree (std::invalid_argument naming the flag). Dropout comes from the
// flags for --init-from, from the checkpoint when resuming.
GptConfig resolve_model_config(const Parsed<TrainFlags>& flags, int64_t data_vocab_size, const RunStart& start);

// Refuses (std::invalid_argument, one line) data whose tokens the stored model cannot read: another
// tokenizer, another character vocabulary, or ids beyond the model's vocabulary.
void require_data_fits_model(const TrainingData& data, const RunStart& start, int64_t model_rows);

// A run that starts at step 0 refuses an --out that holds an earlier run's files (ckpt_*.safetensors,
// the ckpt_*.pt of older builds, metrics.jsonl, run.json), so that nothing of it is overwritten or
// truncated, unless --overwrite is given, or --resume auto found no checkpoint there (a run stopped
// before its first checkpoint starts again): then the process where `remove` is set (rank 0) deletes
// those files, and only those.
// Returns what it removed, for the log.
std::vector<std::string> prepare_output_folder(const Parsed<TrainFlags>& flags, const RunStart& start, bool remove);

}  // namespace mygpt
