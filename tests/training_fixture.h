#pragma once
// Training runs for the tests, built the way `train` builds them (launcher/run_builder.h): options from
// command-line style arguments, data from tokens made here.
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataloader/token_source.h"
#include "dataloader/training_data.h"
#include "distributed/communicator.h"
#include "launcher/run_builder.h"
#include "launcher/train_flags.h"

namespace mygpt::testing {

inline Parsed<TrainFlags> train_flags(const std::vector<std::string>& args) { return train_flag_table().parse(args); }

// n tokens below vocab, drawn from seed.
inline std::shared_ptr<InMemoryTokens> random_tokens(size_t n, int64_t vocab, uint64_t seed = 11) {
  torch::manual_seed(seed);
  auto t = torch::randint(vocab, {static_cast<int64_t>(n)}, torch::kLong);
  return std::make_shared<InMemoryTokens>(std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n));
}

// A stream with structure a model learns in a few steps: ids below vocab.
inline std::shared_ptr<InMemoryTokens> pattern_tokens(size_t n, int64_t vocab) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>((i * 5 + i / 7) % static_cast<size_t>(vocab));
  return std::make_shared<InMemoryTokens>(std::move(v));
}

// Command-line arguments, "--name value" for each entry.
inline std::vector<std::string> flag_args(const std::map<std::string, std::string>& flags) {
  std::vector<std::string> args;
  for (const auto& [name, value] : flags) {
    args.push_back("--" + name);
    args.push_back(value);
  }
  return args;
}

// Token data of a model with `vocab` ids and no tokenizer.
inline TrainingData token_data(std::shared_ptr<const TokenSource> train, int64_t vocab,
                               std::shared_ptr<const TokenSource> val = nullptr) {
  TrainingData d;
  d.train = std::move(train);
  d.val = std::move(val);
  d.vocab_size = vocab;
  d.tokenizer_kind = TokenizerKind::none;
  d.description = "test tokens";
  return d;
}

// A run of these options on `device` over `data`, resolved and built as `train` does (a fresh start, or
// the one the flags name).
inline std::unique_ptr<Trainer> trainer_of(const Parsed<TrainFlags>& flags, const TrainingData& data, Communicator& comm,
                                           const torch::Device& device) {
  const RunStart start = open_run_start(flags);
  const RunPlan plan = plan_for_data(flags, start, data, device, comm.world_size(), comm.rank());
  return build_trainer(plan, data, comm, device, {}, start);
}

// A single-process run on the CPU.
inline std::unique_ptr<Trainer> cpu_trainer(const std::vector<std::string>& args, const TrainingData& data) {
  static LocalCommunicator single;
  return trainer_of(train_flags(args), data, single, torch::kCPU);
}

}  // namespace mygpt::testing
