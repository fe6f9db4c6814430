#pragma once
// A training run resolved once: from the flags given, how the run starts (launcher/run_start.h), the data's
// facts, the device and the number of ranks, every derivation and every refusal, into a typed plan that
// `train`, `plan` and the tests share. launcher/run_builder.h then only constructs the run from it.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "dataloader/batch_loader.h"
#include "dataloader/training_data.h"
#include "launcher/run_course.h"
#include "launcher/run_start.h"
#include "launcher/train_flags.h"

namespace mygpt {

// The tokenizer of the run's ids: the data's, or (token data without one) the stored model's it starts
// from, whose ids the data must be to train it.
struct RunTokenizer {
  TokenizerKind kind = TokenizerKind::none;
  std::string data;
};

// What the plan knows of the data: the model's vocabulary as the data gives it, and, where it was loaded
// (train, the tests), the data itself: its tokenizer, its size, its conversations.
struct DataFacts {
  int64_t vocab_size = 0;
  const TrainingData* loaded = nullptr;  // must outlive resolve_run; null: not loaded (plan)
};

// Where the data's facts come from: `read` gets the resolved data options (train loads the data, plan sizes
// it); or `assumed` facts (plan without DATA), the data options then taken as given, without their checks.
struct DataSource {
  std::function<DataFacts(const DataOptions&)> read;
  std::optional<DataFacts> assumed;
};

// Where the run goes. `here`: this process is the run (train, the tests), so its device and its build are
// checked (CUDA-only flags, kernels built without nvcc); false for `plan`, which sizes a run for a machine
// that may be another.
struct RunPlace {
  torch::Device device = torch::kCPU;
  int world_size = 1;
  bool here = true;
  int rank = 0;  // here: this process's rank (rank 0 checks --out's disk)
  // Where the log's notes go as they are made (train: rank 0's log, so that they precede a later refusal
  // as they always did); unset: kept in RunPlan::notes for build_trainer to print.
  std::function<void(const std::string&)> note;
};

struct RunPlan {
  Parsed<TrainFlags> flags;  // the run's options: those given, the others a resumed checkpoint's (gave: given now)
  DataOptions data;          // as the data is read (a BPE tokenizer as the --vocab folder says)
  GptConfig model;
  // Nothing left to derive: seq_len, grad_accum, min_lr, warmup_steps, checkpoint_every, keep_checkpoints
  // and precision are set for this device and world; peak_tflops is looked up where the run is here.
  TrainOptions train;
  // Resolved where the data is loaded (auto from how often the run reads it, a resumed run's own, best-fit's
  // and conversations' rules); without loaded data (plan) as requested.
  DataOrder data_order = DataOrder::sequential;
  RunTokenizer tokenizer;           // where the data is loaded (build_trainer refuses samples, HellaSwag and
                                    // CORE without the tokenizer they need, where its notes on the data precede)
  int64_t document_delimiter = -1;  // --packing best-fit: the token that starts every document
  bool cuda_loss_kernel = false;    // the fused loss runs the CUDA kernel (asked, on CUDA, built)
  bool cuda_norm_kernel = false;    // the blocks run the CUDA LayerNorm kernel (asked, on CUDA, built)
  std::optional<std::string> stored_options;  // the run a resumed checkpoint continues (its options' text)
  // The log's notes, printed by build_trainer where each belongs among its own; empty: none.
  struct Notes {
    std::string warmup;       // the default warm-up shrunk to a short run
    std::string batch;        // the accumulation recomputed for a resume on another number of ranks
    std::string data_order;   // the order chosen or resumed
    std::string packing;      // best-fit on documents mostly longer than a row
    std::string loss_kernel;  // a binary without nvcc runs the fused loss as ATen ops
  } notes;

  // The options a checkpoint stores: the flags with the derived values filled in.
  TrainFlags resolved_flags() const;
};

// The one resolution of a run; std::invalid_argument (one line) for every refusal. Where the run is here,
// a run the device cannot hold, or whose checkpoints --out's file system cannot, is refused too (`plan`
// prints the same estimates); rank 0 alone checks the disk.
RunPlan resolve_run(const Parsed<TrainFlags>& given, const RunStart& start, const DataSource& data,
                    const RunPlace& place);

// resolve_run for a run of this process on `device` over data it has loaded (train, the tests).
RunPlan plan_for_data(const Parsed<TrainFlags>& flags, const RunStart& start, const TrainingData& data,
                      const torch::Device& device, int world_size, int rank = 0);

// The steps of resolve_run, each testable alone.

// The flags of a resumed run: every option of the run (not those of the process: --device, --threads,
// --out, ...; see OptionTable::take_stored) that the user did not give again is the checkpoint's, so that
// `--resume auto` alone continues the run as it was configured. Without resuming: flags as they are.
Parsed<TrainFlags> resumed_flags(const Parsed<TrainFlags>& flags, const RunStart& start);

// The data options a run loads with. Text data without --tokenizer is tokenized with GPT-2's BPE when
// --vocab is given or the stored model has GPT-2's tokenizer files (which then serve as --vocab, for
// token data too); token data without --vocab-size takes the stored model's vocabulary. Flags the data
// does not use are refused as the Data rows declare (std::invalid_argument): --tokenizer and
// --val-fraction with token data, --val-data and --vocab-size with text, --vocab with --tokenizer char.
DataOptions resolve_data_options(const Parsed<TrainFlags>& flags, const RunStart& start);

// The training options with the derived values filled in: --seq-len 0 becomes the block size, the
// accumulation comes from --total-batch-tokens when that is set, and precision auto becomes bf16 on
// CUDA (fp32 elsewhere). Throws std::invalid_argument for settings that contradict each other, and
// for flags given that have no effect (the rows' declared refusals: --eval-steps with --eval-every 0,
// --hellaswag-every without --hellaswag, --sample-prompt with --sample-every 0, ...).
TrainOptions resolve_train_options(const Parsed<TrainFlags>& flags, const GptConfig& model, const torch::Device& device,
                                   int world_size);

}  // namespace mygpt
