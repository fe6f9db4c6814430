#pragma once
// The training loop. One optimizer step (Trainer::train_step in trainer.cpp) reads top to bottom:
// micro-batches with gradient accumulation, gradient sync across ranks, clipping, LR schedule, AdamW.
// The evaluations are in trainer_evaluation.cpp, checkpoints and resuming in trainer_checkpoints.cpp.
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <limits>
#include <memory>
#include <vector>

#include "dataloader/batch_loader.h"
#include "dataloader/chat_batch_loader.h"
#include "eval/hellaswag_reader.h"
#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint.h"
#include "trainer/gradient_norm.h"
#include "eval/bits_per_byte.h"
#include "eval/core_eval.h"
#include "trainer/cuda_graph_step.h"
#include "trainer/fully_sharded_model.h"
#include "eval/evaluator.h"
#include "eval/hellaswag_eval.h"
#include "trainer/loss_scaler.h"
#include "trainer/lr_schedule.h"
#include "trainer/muon.h"
#include "trainer/rank_consistency.h"
#include "trainer/run_output.h"
#include "trainer/sharded_adamw.h"
#include "trainer/stateful_parts.h"
#include "trainer/time_budget.h"
#include "trainer/train_options.h"

namespace mygpt {

// What a Trainer works on and owns; launcher/run_builder.cpp builds them.
struct TrainerParts {
  Gpt model{nullptr};
  std::unique_ptr<AdamW> optimizer;  // null with --zero 1 or 2 (then `zero`)
  std::unique_ptr<Muon> muon;        // --optimizer muon: the blocks' matrices (AdamW has the rest); else null
  // The gradient buckets over the model's parameters (sharded with --zero 1 and 2), and with --zero 1 or 2 the AdamW of
  // this rank's shard of them (else null).
  std::unique_ptr<GradientSynchronizer> grad_sync;
  std::unique_ptr<ShardedAdamW> zero;
  // --zero 3: the model's units sharded across ranks (then grad_sync is null, and `zero` is over its runs).
  std::unique_ptr<FullyShardedModel> fully_sharded;
  LrSchedule schedule;  // the peak learning rate's warm-up and decay; Muon's follows it, scaled
  std::unique_ptr<BatchLoader> train_loader;
  std::unique_ptr<ShardedBatchLoader> val_loader;  // null: no validation loss
  // Supervised fine-tuning (train --sft): train_loader is a ChatBatchLoader, whose untrained targets are
  // kUntrainedTarget, and the loss is a mean over the trained (assistant) tokens of the global batch.
  bool sft = false;
  std::unique_ptr<ChatBatchLoader> sft_val_loader;  // SFT: held-out conversations; null: no validation loss
  int64_t sft_val_batches = 0;                      // batches of them per evaluation, all ranks together
  // The tokenizer's tokens (GPT-2: 50257 of the 50304 rows); the validation loss is over these, as eval's
  // and transformers' on the exported model are. 0: every row.
  int64_t val_vocab_limit = 0;
  std::optional<BitsPerByte> val_bpb;  // bits per byte beside the validation loss; empty without a tokenizer
  std::vector<TokenizedHellaSwag> hellaswag;       // empty: no HellaSwag
  std::optional<CoreBundle> core;                  // empty: no CORE
  std::shared_ptr<const TextCodec> core_codec;     // the run's tokenizer, with --core
  int64_t core_vocab_limit = 0;                    // the tokenizer's tokens among the model's rows
  torch::Device device = torch::kCPU;
  CheckpointMeta checkpoint_meta;           // written into every checkpoint, with its step
  std::function<double()> peak_memory_mib;  // CUDA allocator peak, or peak RSS on CPU
  std::function<std::string(Gpt&)> sample;  // a text sample from the model (rank 0 prints it)
  std::function<bool()> stop_requested;     // SIGINT/SIGTERM seen by this process
  TimeBudget::Clock budget_clock;           // --time-budget's clock (time_budget_clock); empty: the steady clock
};

struct StepResult {
  double loss;       // mean over all micro-batches of all ranks
  double grad_norm;  // global norm after synchronization, before clipping
  double lr;
  bool skipped;         // the loss or the gradient norm was not finite: the weights did not change
  bool stop_requested;  // some rank was asked to stop (SIGINT/SIGTERM)
  double loss_scale;    // fp16: what the loss was multiplied by in this step; 1 otherwise
  double trained_tokens;  // targets the loss counted, all ranks: every token, or SFT's assistant tokens
};

struct TrainSummary {
  double first_loss = 0, last_loss = 0;
  double last_val_loss = -1;  // -1 when no validation ran
  int64_t steps_run = 0;
  int64_t steps_skipped = 0;   // not finite: no update (fp16 overflows included)
  bool stopped_early = false;  // a stop signal ended the run after a checkpoint
  double last_val_bpb = std::numeric_limits<double>::quiet_NaN();  // of the last validation recorded, if any
};

class Trainer {
 public:
  // comm must outlive the Trainer. options.precision is already resolved for the device.
  Trainer(TrainerParts parts, const TrainOptions& options, Communicator& comm, RunOutput output);

  // The model's shape and the batch per step, for the log.
  void print_setup() const;
  // Trains from start_step (0, or the step a checkpoint was saved at) to options.steps, or with --time-budget
  // until the budget is spent (whichever comes first).
  TrainSummary run(int64_t start_step);
  StepResult train_step(int64_t step);
  // Mean validation loss over eval_steps batches of all ranks together (eval/validation_batches.h), as
  // `eval --val` computes it (eval/validation_loss.h).
  double evaluate();
  // The bits per byte of the last evaluate() (eval/bits_per_byte.h); NaN when the run has no tokenizer
  // (token data without --vocab) or validates conversations.
  double last_val_bpb() const { return last_val_bpb_; }
  void save_checkpoint_at(int64_t steps_done);
  // Restores every stateful part; returns the step to continue from. Throws std::invalid_argument when
  // the checkpoint cannot continue this run.
  int64_t restore(const Checkpoint& checkpoint);

  // Every position of a step's batches, all ranks (SFT trains fewer of them: StepResult::trained_tokens).
  double tokens_per_step() const;
  // Model FLOPs per trained token: 6 per weight (forward + backward) plus attention (PaLM appendix B).
  double flops_per_token() const;

  Gpt& model() { return p_.model; }
  // Copies of the model's parameters, whole, in its parameters() order: with --zero 3 gathered unit by
  // unit (a collective; every rank gets them), since the model's own tensors hold nothing between uses.
  std::vector<torch::Tensor> whole_parameters();
  AdamW& optimizer() { return zero_ ? zero_->adamw() : *p_.optimizer; }
  BatchLoader& train_loader() { return *p_.train_loader; }
  const TrainOptions& options() const { return options_; }
  RunOutput& output() { return output_; }
  const CheckpointMeta& checkpoint_meta() const { return p_.checkpoint_meta; }
  bool has_validation() const { return p_.val_loader != nullptr || p_.sft_val_loader != nullptr; }
  // --cuda-graph: the step has been captured (after its warm-up steps) and is replayed from now on.
  bool step_graph_captured() const { return graph_step_ && graph_step_->captured(); }
  // --time-budget's clock and what it has spent; null without one.
  const TimeBudget* time_budget() const { return budget_.get(); }

 private:
  struct NamedPart {
    std::string name;         // prefix of its tensors in a checkpoint
    std::string description;  // for messages
    StatefulPart& part;
    bool fresh_if_absent = false;  // a checkpoint without it resumes with this part as built (else refused)
  };
  std::vector<NamedPart> stateful_parts();
  std::vector<CheckpointEntry> checkpoint_entries();
  void log_step(int64_t step, const StepResult& r, double dt, double& smoothed_dt);
  // Validation, HellaSwag and a sample, each when due at this step (all of them when final). Returns
  // false when a stop (SIGTERM, SIGINT) cut them short: what they had found is not recorded.
  bool evaluate_at(int64_t step, bool final, TrainSummary& summary);
  // The stop check and --zero 3's idle forward for the evaluations' rounds.
  EvaluationRounds evaluation_rounds();
  // What the run evaluates (eval/evaluator.h), from its parts and options.
  EvaluationPlan evaluation_plan();
  // Whether a stop was asked of any rank: a collective when the run can be stopped, so every rank must
  // call it at the same point; false without one.
  bool stop_agreed();
  // --time-budget, before step `step`: false when the budget is spent; else sets the schedule's progress, the
  // share of the run done (the budget's, or of --steps where that is further along). A collective.
  bool budget_allows(int64_t step);
  void prune_checkpoints();
  // Ends a run after --max-bad-steps bad steps in a row (std::runtime_error), saving the weights only
  // when they are good.
  [[noreturn]] void stop_after_bad_steps(int64_t bad_in_a_row, int64_t steps_done, const StepResult& last);
  bool stop_requested_here() const;
  // The next training micro-batch, copied into inputs_[micro].
  const Batch& next_train_batch(int64_t micro);
  // The step's device work, from zeroing the gradients to the optimizer's update, which --cuda-graph
  // captures: returns the mean loss, the gradient norm, found_inf and the stop flag (device scalars).
  std::vector<torch::Tensor> step_on_device(const std::vector<Batch>& sft_batches, const torch::Tensor& trained_tokens);
  // SFT: the step's micro-batches, read before the first forward, and the count of the targets they train
  // on all ranks together (a device scalar), by which each micro-batch's summed loss is divided.
  std::vector<Batch> read_sft_micro_batches();
  torch::Tensor global_trained_tokens(const std::vector<Batch>& micro_batches);
  bool evaluation_stopped_ = false;  // the last evaluate() ended early by stop_agreed()
  double last_val_bpb_ = std::numeric_limits<double>::quiet_NaN();
  Precision precision() const { return options_.precision; }

  TrainerParts p_;
  TrainOptions options_;
  Communicator& comm_;
  RunOutput output_;
  LrSchedule schedule_;
  // The gradients' reduction across ranks: the buckets (--zero 0, 1, 2) or the model's units (--zero 3).
  GradientSynchronizer* grad_sync_;                    // p_.grad_sync's; null with --zero 3
  RankConsistencyCheck rank_check_;                   // --check-ranks-every
  std::unique_ptr<FullyShardedModel> fully_sharded_;  // --zero 3
  std::unique_ptr<ShardedAdamW> zero_;                 // --zero 1, 2 or 3
  std::optional<GradientNorm> grad_norm_;             // over the buckets; --zero 3's is fully_sharded_'s
  std::unique_ptr<LossScaler> scaler_;  // --precision fp16
  // What a step reads from the device rather than from the host, so that a CUDA graph of the step
  // replays with this step's values (the learning rate lives in AdamW): micro-batch k is copied into the
  // same two tensors inputs_[k] every step, and fp16's loss scale and its inverse, and whether this
  // process was asked to stop, are device scalars.
  std::vector<Batch> inputs_;
  torch::Tensor loss_scale_, inverse_loss_scale_, stop_flag_;
  std::unique_ptr<CudaGraphStep> graph_step_;  // --cuda-graph (trainer/cuda_graph_step.h); else null
  std::unique_ptr<TimeBudget> budget_;         // --time-budget; else null
  double budget_spent_ = 0;                    // seconds, agreed before the step under way
  double budget_progress_ = 0;                 // the schedule's progress for the step under way (at_fraction)
  ModelState model_state_;
  std::unique_ptr<FullyShardedModelState> sharded_model_state_;  // --zero 3: the weights gathered unit by unit
  LoaderState loader_state_;
  RandomState random_state_;
};

}  // namespace mygpt
