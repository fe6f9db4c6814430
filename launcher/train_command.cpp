// `mygpt-ddp train`: sets up the process (device, threads, communicators), loads the data, builds the
// run, resumes it when asked, and trains.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/folder_claim.h"
#include "dataloader/chat_data.h"
#include "distributed/job_communicators.h"
#include "distributed/rank_zero_reports.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/memory_reuse.h"
#include "launcher/run_builder.h"
#include "launcher/run_start.h"
#include "launcher/stop_signal.h"
#include "mygpt/build_config.h"

namespace mygpt {
namespace {

// A model config field's value in run.json: numbers and switches as JSON has them, a choice by its name, the
// soft-cap a number or null.
nlohmann::json json_of(int64_t v) { return v; }
nlohmann::json json_of(double v) { return v; }
nlohmann::json json_of(bool v) { return v; }
nlohmann::json json_of(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
template <typename Enum, typename = std::enable_if_t<std::is_enum_v<Enum>>>
nlohmann::json json_of(Enum v) {
  return enum_name(v);
}

// <out>/run.json: everything about the run that its metrics do not say, written at each (re)start.
nlohmann::json run_record(const Trainer& trainer, const TrainingData& data, const WorldInfo& w,
                          const torch::Device& device, int64_t threads, int64_t start_step) {
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [name, value] : train_flag_table().entries_of_text(trainer.checkpoint_meta().run_config)) {
    options[name] = value;
  }
  nlohmann::json model = nlohmann::json::object();
  visit_shown_fields(trainer.checkpoint_meta().model_config,
                     [&](const char* name, const auto& value) { model[name] = json_of(value); });
  return {{"options", options},
          {"model", model},
          {"tokenizer", std::string(tokenizer_kind_name(trainer.checkpoint_meta().tokenizer_kind))},
          {"data", data.description},
          {"world_size", w.world_size},
          {"nodes", w.node_count},
          {"ranks_per_node", w.local_size},
          {"device", device_name(device)},
          {"threads_per_rank", threads},
          {"start_step", start_step},
          {"started", utc_now_iso8601()},
          {"versions",
           {{"mygpt_ddp", MYGPT_VERSION},
            {"torch", strprintf("%d.%d.%d", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH)}}}};
}

int run_train(const Parsed<TrainFlags>& given_flags, const JobSession& job) {
  const TrainFlags& f = given_flags.config;
  given_flags.refuse("ranks", "in train (it sizes `plan`; train runs on the ranks the launcher starts)");
  given_flags.refuse("gpu-memory", "in train (it is `plan`'s)");
  // Topology and device: cuda:<local rank> on GPUs; on CPU the node's cores are shared among its ranks.
  const WorldInfo& w = job.world();
  std::string device_note;
  const torch::Device device = pick_device(f.runtime.device, w.local_rank, w.local_size, &device_note);
  const int64_t threads = set_cpu_threads(f.runtime.threads, w.local_size);
  if (f.runtime.keep_freed_memory) keep_freed_memory_for_reuse();
  JobCommunicators comms(job, device, f.runtime.comm_timeout, f.runtime.rendezvous, f.runtime.verbose);
  require_same_config_on_all_ranks(comms.host(), train_flag_table().to_text(f) + "build=" + MYGPT_VERSION);
  Communicator& comm = comms.device();

  const RunOutput header = RunOutput::for_rank(w.rank, f.train.out);
  // One run per output folder, held until this function returns or throws: a second run into it is
  // refused before it prints or reads anything there (rank 0 writes the folder; its refusal ends the job).
  std::optional<FolderClaim> claim;
  std::exception_ptr refused;
  if (w.rank == 0) {
    // Named by its batch job: a requeued start takes over the claim its killed predecessor left, even
    // from another node and long before that claim's heartbeat goes stale.
    try {
      claim.emplace(f.train.out, "--out", ClaimingJob{job.launch().batch_job, job.launch().batch_restart});
    } catch (...) {
      refused = std::current_exception();
    }
  }
  // A refusal is rank 0's line alone: the other ranks learn of it here and end with its exit code.
  share_rank_zero_outcome(comms.host(), refused);
  if (claim && !claim->takeover_note().empty()) header.print(claim->takeover_note());
  header.print("device: " + device_name(device));
  if (!device_note.empty()) header.print(device_note);
  header.print(strprintf("world: %s | backend %s | launcher %s | %lld thread(s) per rank",
                         world_layout_text(w).c_str(), comm.backend_name().c_str(),
                         job.launch().description().c_str(), static_cast<long long>(threads)));
  if (!comms.rendezvous_note().empty()) header.print("rendezvous: " + comms.rendezvous_note());

  // A fresh run, the weights of --init-from, or the checkpoint --resume names ("auto": the newest in --out).
  RunStart start = open_run_start(given_flags);
  for (const std::string& note : start.notes) header.print(note);
  const auto removed = prepare_output_folder(given_flags, start, /*remove=*/w.rank == 0);
  if (!removed.empty()) {
    header.print((f.runtime.overwrite ? "--overwrite: removed " : "--resume auto: no checkpoint to continue; removed ") +
                 std::to_string(removed.size()) + " file(s) of an earlier run from " + f.train.out);
  }
  // The run resolved once (a resumed run's options are its checkpoint's, but for those given again), the
  // data loaded on the way with the options it resolves.
  std::optional<TrainingData> loaded;
  DataSource source;
  source.read = [&loaded](const DataOptions& options) {
    loaded.emplace(load_training_data(options));
    return DataFacts{loaded->vocab_size, &*loaded};
  };
  const RunPlace place{device, comm.world_size(), /*here=*/true, comm.rank(),
                       [&header](const std::string& note) { header.print(note); }};
  const RunPlan plan = resolve_run(given_flags, start, source, place);
  const TrainingData& data = *loaded;
  install_stop_signal_handlers();
  std::unique_ptr<Trainer> trainer = build_trainer(plan, data, comm, device, stop_requested, start);
  RunOutput& output = trainer->output();

  int64_t start_step = 0;
  if (start.resume) {
    try {
      start_step = trainer->restore(*start.model->checkpoint);
    } catch (const std::invalid_argument& e) {  // name the checkpoint the problem is in
      throw std::invalid_argument("--resume " + start.model->path.string() + ": " + e.what());
    }
    output.print("resumed from " + start.model->path.string() + " at step " + std::to_string(start_step));
  }
  start.model.reset();  // the stored tensors are in the model (and optimizer) now
  // A finished run started again (--resume auto at its last step) adds nothing: its records (run.json,
  // metrics.jsonl with the final evaluations of that step) are left as they are.
  if (start_step >= trainer->options().steps) {
    output.print("nothing to train: the run is at step " + std::to_string(start_step) + " of " +
                 std::to_string(trainer->options().steps) + "; its records are left as they are");
    return 0;
  }
  if (const TimeBudget* budget = trainer->time_budget(); budget && budget->spent_before() >= budget->budget_seconds()) {
    output.print("nothing to train: the run has spent its --time-budget " + duration_text({budget->budget_seconds()}) +
                 "; its records are left as they are");
    return 0;
  }
  // Conversations are counted as the run's rows left them (a note above says how many were left out).
  const int64_t rows = trainer->options().seq_len + 1;
  const std::string described =
      data.chat ? data.chat->describe(conversations_kept(*data.chat->train, rows),
                                      data.chat->val ? conversations_kept(*data.chat->val, rows) : 0)
                : data.description;
  output.print("data: " + described +
               (data.train ? strprintf(" | train %llu tokens", static_cast<unsigned long long>(data.train->size()))
                           : std::string()));
  for (const std::string& note : data.notes) output.print(note);
  trainer->print_setup();
  // run.json first: published whole or not at all, so a run that cannot write it (a full disk) leaves
  // no empty metrics.jsonl, and with it no --out, behind.
  output.write_record("run.json", run_record(*trainer, data, w, device, threads, start_step));
  output.open_metrics(/*resume=*/start.resume, start_step);

  const TrainSummary summary = trainer->run(start_step);
  if (summary.stopped_early) {
    output.print("stopped early; continue with --resume auto");
  } else if (summary.steps_run > 0) {
    output.print(strprintf("done: loss %.4f -> %.4f over %lld steps", summary.first_loss, summary.last_loss,
                           static_cast<long long>(summary.steps_run)));
  }
  // A run of --time-budget ends with its result in the form recipes are compared by (autoresearch's): the
  // bits per byte of its last validation, the last line.
  if (trainer->time_budget() && !summary.stopped_early && !std::isnan(summary.last_val_bpb)) {
    output.print(strprintf("val_bpb: %.6f", summary.last_val_bpb));
  }
  trainer.reset();  // its model, optimizer and step buffers: free, then handed back
  return_freed_memory();
  return 0;
}

}  // namespace

Command train_command() {
  return make_command<TrainFlags>("train", "train [DATA] [options]",
                                  "train a GPT (N ranks: mpirun -np N, torchrun --nproc-per-node N --no-python, or srun)", /*multi_rank=*/true,
                                  &train_flag_table, &run_train, &shown_in_train_help);
}

}  // namespace mygpt
