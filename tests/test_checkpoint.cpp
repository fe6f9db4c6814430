// Checkpoints: what a save/load round trip keeps, resuming a run exactly, rejecting bad files with a
// message that names them, atomic writes and finding the newest checkpoint.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataloader/batch_loader.h"
#include "dataloader/token_source.h"
#include "distributed/communicator.h"
#include "common/checksum.h"
#include "model/gpt.h"
#include "model/hf/safetensors_file.h"
#include "tests/expect_refused.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tests/training_fixture.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint.h"
#include "trainer/run_output.h"
#include "trainer/stateful_parts.h"
#include "trainer/trainer.h"
#include "launcher/run_course.h"
#include "launcher/run_plan.h"

namespace mygpt::checkpoint_test {
namespace {

using testing::invalid_argument_message;

namespace fs = std::filesystem;

constexpr int64_t kVocab = 19;

GptConfig tiny_config() { return testing::small_config(kVocab, 16); }

Gpt tiny_model(uint64_t seed) {
  torch::manual_seed(seed);
  return Gpt(tiny_config());
}

torch::Tensor random_tokens(int64_t b, int64_t t, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(kVocab, {b, t}, torch::kLong);
}

AdamW make_optimizer(Gpt& model) {
  return AdamW(model->decay_parameters(), model->no_decay_parameters(), AdamWOptions{1e-2, 0.9, 0.95, 1e-8, 0.1});
}

// One optimizer step on a fixed batch.
void train_one_step(Gpt& model, AdamW& optimizer, uint64_t batch_seed) {
  optimizer.zero_grad();
  model->loss(random_tokens(4, 16, batch_seed), random_tokens(4, 16, batch_seed + 100)).backward();
  optimizer.step();
}

CheckpointMeta sample_meta(int64_t step) {
  return CheckpointMeta{tiny_config(), TokenizerKind::character, "\n !abcé", step, "steps=10\nlr=0.001\n"};
}

// What a checkpoint of a model (and an optimizer, when given) and some extra state holds.
StateDict model_state(Gpt& model, const AdamW* optimizer = nullptr, const StateDict& extra = {}) {
  StateDict tensors = extra;
  add_part_state(tensors, "model", ModelState(model).state_dict());
  if (optimizer != nullptr) add_part_state(tensors, "optimizer", optimizer->state_dict());
  return tensors;
}

void save(const fs::path& path, Gpt& model, const AdamW* optimizer, const CheckpointMeta& meta,
          const StateDict& extra = {}) {
  save_checkpoint(path, meta, model_state(model, optimizer, extra));
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> file_names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

void expect_equal_parameters(Gpt& a, Gpt& b) {
  const auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
}

// A checkpoint at step 3 of a model trained one step (its optimizer has taken one).
fs::path save_trained(const fs::path& path) {
  Gpt model = tiny_model(1);
  AdamW optimizer = make_optimizer(model);
  train_one_step(model, optimizer, 3);
  save(path, model, &optimizer, sample_meta(3));
  return path;
}

// ---------------------------------------------------------------------------------------------

TEST(Checkpoint, RoundTripKeepsModelMetaAndExtraState) {
  ScratchDir dir;
  Gpt model = tiny_model(1);
  AdamW optimizer = make_optimizer(model);
  train_one_step(model, optimizer, 7);  // weights that differ from any fresh initialization
  const std::map<std::string, torch::Tensor> extra = {{"train_loader", torch::tensor({42}, torch::kLong)},
                                                      {"rng", torch::randn({5})}};
  const fs::path path = checkpoint_path(dir.path(), 3);
  save(path, model, &optimizer, sample_meta(3), extra);

  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.meta.model_config, tiny_config());
  EXPECT_EQ(loaded.meta.tokenizer_kind, TokenizerKind::character);
  EXPECT_EQ(loaded.meta.tokenizer_data, "\n !abcé");
  EXPECT_EQ(loaded.meta.step, 3);
  EXPECT_EQ(loaded.meta.run_config, "steps=10\nlr=0.001\n");
  const StateDict saved = model_state(model, &optimizer, extra);
  ASSERT_EQ(loaded.tensors.size(), saved.size());
  for (const auto& [name, tensor] : saved) {
    ASSERT_TRUE(loaded.tensors.count(name)) << name;
    EXPECT_TRUE(torch::equal(loaded.tensors.at(name), tensor)) << name;
  }

  Gpt loaded_model = model_from_checkpoint(loaded);
  model->eval();
  loaded_model->eval();
  torch::NoGradGuard no_grad;
  const auto idx = random_tokens(3, 16, 9);
  EXPECT_TRUE(torch::equal(loaded_model->forward(idx), model->forward(idx)));
  EXPECT_FALSE(torch::equal(tiny_model(1)->forward(idx), model->forward(idx)));  // the step changed something
}

TEST(Checkpoint, OptimizerStateRoundTrip) {
  ScratchDir dir;
  Gpt model = tiny_model(2);
  AdamW optimizer = make_optimizer(model);
  for (uint64_t s = 0; s < 3; ++s) train_one_step(model, optimizer, s);
  const fs::path path = dir.path() / "ckpt.safetensors";
  save(path, model, &optimizer, sample_meta(3));

  const Checkpoint loaded = load_checkpoint(path);
  Gpt loaded_model = model_from_checkpoint(loaded);
  AdamW restored = make_optimizer(loaded_model);
  restored.load_state_dict(part_state(loaded.tensors, "optimizer"));
  EXPECT_EQ(restored.steps_taken(), 3);

  // Further steps from the restored state match the original exactly; a fresh optimizer does not.
  Gpt fresh_copy = model_from_checkpoint(load_checkpoint(path));
  AdamW fresh = make_optimizer(fresh_copy);
  for (uint64_t s = 3; s < 5; ++s) {
    train_one_step(model, optimizer, s);
    train_one_step(loaded_model, restored, s);
    train_one_step(fresh_copy, fresh, s);
  }
  const auto original = model->parameters(), resumed = loaded_model->parameters(), reset = fresh_copy->parameters();
  bool fresh_differs = false;
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_TRUE(torch::equal(original[i], resumed[i])) << "parameter " << i;
    fresh_differs = fresh_differs || !torch::equal(original[i], reset[i]);
  }
  EXPECT_TRUE(fresh_differs);
}

TEST(Checkpoint, OptimizerStateMustMatchAndExist) {
  ScratchDir dir;
  Gpt model = tiny_model(2);
  AdamW optimizer = make_optimizer(model);
  train_one_step(model, optimizer, 0);
  save(dir.path() / "with.safetensors", model, &optimizer, sample_meta(1));
  save(dir.path() / "without.safetensors", model, nullptr, sample_meta(1));

  const Checkpoint without = load_checkpoint(dir.path() / "without.safetensors");
  Gpt without_model = model_from_checkpoint(without);
  AdamW other = make_optimizer(without_model);
  EXPECT_THROW(other.load_state_dict(part_state(without.tensors, "optimizer")), std::invalid_argument);

  GptConfig wider = tiny_config();
  wider.n_embd = 64;
  torch::manual_seed(0);
  Gpt different(wider);
  AdamW mismatched = make_optimizer(different);
  const Checkpoint with = load_checkpoint(dir.path() / "with.safetensors");
  EXPECT_THROW(mismatched.load_state_dict(part_state(with.tensors, "optimizer")), std::invalid_argument);
}

// Training k steps, saving, restoring into a freshly built run and training on gives the losses of an
// uninterrupted run, bit for bit.
TEST(Checkpoint, ResumeGivesIdenticalLosses) {
  ScratchDir dir;
  auto args = [&](const std::string& seed) {
    return std::vector<std::string>{"--preset",     "tiny", "--block-size", "16", "--steps",        "6",
                                    "--batch-size", "4",    "--seq-len",    "16", "--warmup-steps", "2",
                                    "--lr",         "1e-2", "--eval-every", "0",  "--out",          dir.path().string(),
                                    "--device",     "cpu",  "--seed",       seed};
  };
  const TrainingData data = testing::token_data(testing::random_tokens(1500, kVocab, 5), kVocab);

  auto straight = testing::cpu_trainer(args("4"), data);
  std::vector<double> expected;
  for (int64_t step = 0; step < 6; ++step) expected.push_back(straight->train_step(step).loss);

  {
    auto first = testing::cpu_trainer(args("4"), data);
    for (int64_t step = 0; step < 3; ++step) EXPECT_EQ(first->train_step(step).loss, expected[step]);
    first->save_checkpoint_at(3);
  }
  const Checkpoint ckpt = load_checkpoint(checkpoint_path(dir.path(), 3));
  EXPECT_EQ(ckpt.meta.step, 3);
  // Another initialization and a loader elsewhere: restore must bring back weights and position.
  auto resumed = testing::cpu_trainer(args("99"), data);
  resumed->train_loader().next(torch::kCPU);
  ASSERT_EQ(resumed->restore(ckpt), 3);
  EXPECT_EQ(static_cast<ShardedBatchLoader&>(resumed->train_loader()).position(), 3u);
  EXPECT_EQ(resumed->optimizer().steps_taken(), 3);
  for (int64_t step = 3; step < 6; ++step) {
    EXPECT_EQ(resumed->train_step(step).loss, expected[step]) << "step " << step;
  }
  expect_equal_parameters(resumed->model(), straight->model());
}

TEST(Checkpoint, MissingFileIsNamed) {
  ScratchDir dir;
  const fs::path path = dir.path() / "nothing_here.safetensors";
  const std::string message = invalid_argument_message([&] { load_checkpoint(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  const std::string dir_message = invalid_argument_message([&] { load_checkpoint(dir.path()); });
  EXPECT_NE(dir_message.find(dir.path().string()), std::string::npos) << dir_message;
}

TEST(Checkpoint, TruncatedFileIsNamed) {
  ScratchDir dir;
  Gpt model = tiny_model(1);
  const fs::path good = dir.path() / "good.safetensors";
  save(good, model, nullptr, sample_meta(1));
  const std::string bytes = read_file(good);
  ASSERT_GT(bytes.size(), 1000u);
  const fs::path truncated = dir.path() / "truncated.safetensors";
  write_file(truncated, bytes.substr(0, bytes.size() / 2));
  const std::string message = invalid_argument_message([&] { load_checkpoint(truncated); });
  EXPECT_NE(message.find(truncated.string()), std::string::npos) << message;
  EXPECT_NO_THROW(load_checkpoint(good));
}

TEST(Checkpoint, ForeignFilesAreNamed) {
  ScratchDir dir;
  std::mt19937 rng(1);
  std::string noise(4096, '\0');
  for (char& ch : noise) ch = static_cast<char>(rng() & 0xFF);
  const fs::path random_bytes = dir.path() / "random.safetensors";
  write_file(random_bytes, noise);

  const fs::path empty = dir.path() / "empty.safetensors";
  write_file(empty, "");

  // Valid torch archives that are not ours: other keys, a pickled tensor, a foreign format tag.
  const fs::path other_archive = dir.path() / "other_archive.safetensors";
  {
    torch::serialize::OutputArchive archive;
    archive.write("weights", torch::ones({3, 3}));
    archive.save_to(other_archive.string());
  }
  const fs::path pickled = dir.path() / "pickled.safetensors";
  torch::save(torch::ones({4}), pickled.string());
  const fs::path other_tag = dir.path() / "other_tag.safetensors";
  {
    torch::serialize::OutputArchive archive;
    archive.write("format", c10::IValue(std::string("someone else's checkpoint")));
    archive.save_to(other_tag.string());
  }

  for (const fs::path& path : {random_bytes, empty, other_archive, pickled, other_tag}) {
    const std::string message = invalid_argument_message([&] { load_checkpoint(path); });
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;  // one line for the CLI
  }
}

TEST(Checkpoint, AtomicWriteLeavesNoTemporaryFile) {
  ScratchDir dir;
  Gpt model = tiny_model(1);
  AdamW optimizer = make_optimizer(model);
  const fs::path path = checkpoint_path(dir.path() / "nested" / "out", 10);  // directories are created
  save(path, model, &optimizer, sample_meta(10));
  EXPECT_EQ(file_names(path.parent_path()), std::vector<std::string>{"ckpt_00000010.safetensors"});

  // Overwriting replaces the file in one piece.
  Gpt other = tiny_model(2);
  save(path, other, nullptr, sample_meta(11));
  EXPECT_EQ(file_names(path.parent_path()), std::vector<std::string>{"ckpt_00000010.safetensors"});
  EXPECT_EQ(load_checkpoint(path).meta.step, 11);
}

TEST(Checkpoint, LatestAndResolve) {
  ScratchDir dir;
  EXPECT_EQ(checkpoint_path(dir.path(), 1234).filename().string(), "ckpt_00001234.safetensors");
  EXPECT_FALSE(latest_checkpoint(dir.path()).has_value());
  EXPECT_FALSE(latest_checkpoint(dir.path() / "absent").has_value());
  const std::string message = invalid_argument_message([&] { resolve_checkpoint(dir.path()); });
  EXPECT_NE(message.find(dir.path().string()), std::string::npos) << message;

  Gpt model = tiny_model(1);
  for (int64_t step : {5, 100, 20}) save(checkpoint_path(dir.path(), step), model, nullptr, sample_meta(step));
  // Things that are not checkpoints do not count.
  write_file(dir.path() / "ckpt_00000999.safetensors.tmp", "partial");
  write_file(dir.path() / "model_99999999.safetensors", "other");
  write_file(dir.path() / "ckpt_00000500.txt", "notes");
  fs::create_directories(dir.path() / "ckpt_00009999.safetensors");
  write_file(dir.path() / "ckpt_final.safetensors", "not a step");
  write_file(dir.path() / "ckpt_00000700.pt.bak", "a copy");

  EXPECT_EQ(latest_checkpoint(dir.path()).value_or("").string(), checkpoint_path(dir.path(), 100).string());
  EXPECT_EQ(resolve_checkpoint(dir.path()).string(), checkpoint_path(dir.path(), 100).string());
  EXPECT_EQ(load_checkpoint(resolve_checkpoint(dir.path())).meta.step, 100);
  const fs::path file = checkpoint_path(dir.path(), 5);
  EXPECT_EQ(resolve_checkpoint(file).string(), file.string());
}

// Builds before checkpoints were named for their format wrote the same files as "ckpt_<step>.pt".
TEST(Checkpoint, OldNamesAreFoundByStepBesideNewOnes) {
  EXPECT_EQ(checkpoint_file_step("out/ckpt_00000042.safetensors"), 42);
  EXPECT_EQ(checkpoint_file_step("ckpt_00000042.pt"), 42);
  EXPECT_EQ(checkpoint_file_step("ckpt_123456789.safetensors"), 123456789);  // past 8 digits
  for (const char* other : {"ckpt_.pt", "ckpt_12a.safetensors", "model.safetensors", "ckpt_00000042.bin",
                            "xckpt_00000042.pt", "ckpt_00000042.safetensors.tmp"}) {
    EXPECT_FALSE(checkpoint_file_step(other).has_value()) << other;
  }

  ScratchDir dir;
  Gpt model = tiny_model(1);
  const auto save_as = [&](const std::string& name, int64_t step) {
    save(dir.path() / name, model, nullptr, sample_meta(step));
    return dir.path() / name;
  };
  const fs::path old_5 = save_as("ckpt_00000005.pt", 5);
  const fs::path new_10 = save_as("ckpt_00000010.safetensors", 10);
  const fs::path old_20 = save_as("ckpt_00000020.pt", 20);
  // The highest step wins whatever its name; the step, not the name, orders them.
  EXPECT_EQ(latest_checkpoint(dir.path()).value_or("").string(), old_20.string());
  EXPECT_EQ(load_checkpoint(resolve_checkpoint(dir.path())).meta.step, 20);
  const fs::path new_100 = save_as("ckpt_100000000.safetensors", 100000000);
  EXPECT_EQ(latest_checkpoint(dir.path()).value_or("").string(), new_100.string());
  fs::remove(new_100);
  // Both names for one step: the .safetensors is the newer; the .pt is listed (and so pruned) first.
  const fs::path new_20 = save_as("ckpt_00000020.safetensors", 20);
  EXPECT_EQ(latest_checkpoint(dir.path()).value_or("").string(), new_20.string());
  EXPECT_EQ(list_checkpoints(dir.path()), (std::vector<fs::path>{old_5, new_10, old_20, new_20}));
}

// A run resumed from a folder of old-named checkpoints prunes both names together, oldest first.
TEST(Checkpoint, KeepCheckpointsCountsBothNames) {
  ScratchDir dir;
  dir.write("ckpt_00000001.pt", "an old-named checkpoint, older than this run's");
  dir.write("ckpt_00000005.pt", "an old-named checkpoint between this run's");
  const TrainingData data = testing::token_data(testing::random_tokens(1500, kVocab, 5), kVocab);
  testing::cpu_trainer({"--preset", "tiny", "--block-size", "16", "--steps", "6", "--batch-size", "4", "--seq-len",
                        "16", "--eval-every", "0", "--checkpoint-every", "2", "--keep-checkpoints", "2", "--out",
                        dir.path().string(), "--device", "cpu"},
                       data)
      ->run(0);
  EXPECT_EQ(list_checkpoints(dir.path()),
            (std::vector<fs::path>{dir.path() / "ckpt_00000005.pt", checkpoint_path(dir.path(), 6)}));
}

TEST(Checkpoint, DamageIsDetectedAndNamed) {
  ScratchDir dir;
  const fs::path good = save_trained(dir.path() / "good.safetensors");
  const std::string bytes = read_file(good);

  // One flipped exponent bit in the last tensor's data, and a changed digit in the metadata (same length).
  std::string flipped = bytes;
  flipped[flipped.size() - 2] = static_cast<char>(flipped[flipped.size() - 2] ^ 0x40);
  const fs::path bit = dir.write("bit.safetensors", flipped);
  const std::string bit_message = invalid_argument_message([&] { load_checkpoint(bit); });
  EXPECT_NE(bit_message.find(bit.string()), std::string::npos) << bit_message;
  EXPECT_NE(bit_message.find("fails its checksum"), std::string::npos) << bit_message;
  EXPECT_NE(bit_message.find("tensor '"), std::string::npos) << bit_message;

  std::string edited = bytes;
  const size_t at = edited.find("\"step\":\"3\"");
  ASSERT_NE(at, std::string::npos);
  edited[at + 8] = '5';
  const fs::path meta = dir.write("meta.safetensors", edited);
  const std::string meta_message = invalid_argument_message([&] { load_checkpoint(meta); });
  EXPECT_NE(meta_message.find("metadata fails its checksum"), std::string::npos) << meta_message;

  // Every truncation point is refused by name, none crashes.
  for (size_t keep : {size_t{0}, size_t{7}, size_t{100}, bytes.size() / 3, bytes.size() - 1}) {
    const fs::path cut = dir.write("cut.safetensors", bytes.substr(0, keep));
    const std::string message = invalid_argument_message([&] { load_checkpoint(cut); });
    EXPECT_NE(message.find(cut.string()), std::string::npos) << keep << ": " << message;
  }
  EXPECT_NO_THROW(load_checkpoint(good));
}

// generate, eval and export read the weights alone: damage in the optimizer's state does not stop them,
// while resuming (which needs it) still refuses the file; --resume auto falls back to an older intact one.
TEST(Checkpoint, WeightsAloneLoadPastDamagedOptimizerStateAndResumeFallsBack) {
  ScratchDir dir;
  const fs::path good = save_trained(dir.path() / "good.safetensors");
  std::string bytes = read_file(good);
  // Tensors lie largest element first, then by name: the file's last bytes are an optimizer tensor's.
  const SafetensorsReader reader = SafetensorsReader::open(good);
  ASSERT_EQ(reader.names().back().rfind("optimizer.", 0), 0u) << reader.names().back();
  bytes[bytes.size() - 2] = static_cast<char>(bytes[bytes.size() - 2] ^ 0x40);
  const fs::path out = dir.path() / "run";
  fs::create_directories(out);
  fs::copy_file(good, checkpoint_path(out, 3));
  const fs::path damaged = dir.write("run/ckpt_00000004.safetensors", bytes);

  const std::string message = invalid_argument_message([&] { load_checkpoint(damaged); });
  EXPECT_NE(message.find("'" + reader.names().back() + "' fails its checksum"), std::string::npos) << message;
  const Checkpoint weights = load_checkpoint(damaged, CheckpointParts::weights);
  EXPECT_TRUE(part_state(weights.tensors, "optimizer").empty());
  const Checkpoint whole = load_checkpoint(good);
  for (const auto& [name, tensor] : part_state(whole.tensors, "model")) {
    EXPECT_TRUE(torch::equal(tensor, weights.tensors.at("model." + name))) << name;
  }
  EXPECT_NO_THROW(open_stored_model(damaged));  // as generate, eval and export open it

  const RunStart start = open_run_start(testing::train_flags({"--resume", "auto", "--out", out.string()}));
  ASSERT_TRUE(start.resume);
  EXPECT_EQ(start.model->path, checkpoint_path(out, 3));
  ASSERT_EQ(start.notes.size(), 1u);
  EXPECT_NE(start.notes[0].find("passed over a damaged checkpoint: checkpoint '" + damaged.string() + "'"),
            std::string::npos) << start.notes[0];
  EXPECT_NE(start.notes[0].find("fails its checksum"), std::string::npos) << start.notes[0];
  // Nothing intact: the newest one's error, not a fresh run over the old one's files.
  fs::remove(checkpoint_path(out, 3));
  const std::string none = invalid_argument_message(
      [&] { open_run_start(testing::train_flags({"--resume", "auto", "--out", out.string()})); });
  EXPECT_NE(none.find(damaged.string()), std::string::npos) << none;
}

// --init-from with --resume auto (a requeued fine-tuning job): the weights while --out has no checkpoint,
// the run's own checkpoint once it has one; with a --resume path, --init-from is refused.
TEST(Checkpoint, InitFromWithResumeAutoStartsOnceThenResumes) {
  ScratchDir dir;
  const fs::path weights = save_trained(dir.path() / "pretrained.safetensors");
  const fs::path out = dir.path() / "finetune";
  const auto flags = [&] {
    return testing::train_flags({"--init-from", weights.string(), "--resume", "auto", "--out", out.string()});
  };
  const RunStart first = open_run_start(flags());
  ASSERT_TRUE(first.model.has_value());
  EXPECT_FALSE(first.resume);
  EXPECT_EQ(first.model->path, weights);
  EXPECT_TRUE(first.notes.empty());

  fs::create_directories(out);
  fs::copy_file(weights, checkpoint_path(out, 3));
  const RunStart requeued = open_run_start(flags());
  EXPECT_TRUE(requeued.resume);
  EXPECT_EQ(requeued.model->path, checkpoint_path(out, 3));
  ASSERT_EQ(requeued.notes.size(), 1u);
  EXPECT_EQ(requeued.notes[0], "--init-from " + weights.string() + " not used: resuming the run's own checkpoint");

  const std::string both = invalid_argument_message([&] {
    open_run_start(testing::train_flags({"--init-from", weights.string(), "--resume", checkpoint_path(out, 3).string(),
                                         "--out", out.string()}));
  });
  EXPECT_NE(both.find("give --init-from (a new run from stored weights) or --resume PATH"), std::string::npos) << both;
}

// A resumed run takes its options from its checkpoint unless given again: `--resume auto` alone after a
// shakespeare-char run keeps beta2 0.99 (the recipe's; the plain default is 0.95), and the log line names
// every option given anew. The process's own settings (here --threads) are never taken.
TEST(Checkpoint, ResumeTakesTheRunsOptionsFromItsCheckpoint) {
  const Parsed<TrainFlags> original = testing::train_flags(
      {"--preset", "shakespeare-char", "--steps", "40", "--threads", "2", "--sample-every", "5", "--lr", "2e-3"});
  ASSERT_DOUBLE_EQ(original.config.train.beta2, 0.99);
  RunStart start;
  start.resume = true;
  start.model.emplace();
  start.model->path = "out/ckpt_00000020.safetensors";
  start.model->checkpoint.emplace();
  TrainFlags stored = original.config;  // as build_trainer stores it: with the derived values filled in
  stored.train = resolve_train_options(original, original.config.model.resolve(65), torch::kCPU, 1);
  start.model->checkpoint->meta.run_config = train_flag_table().to_text(stored);

  const auto resumed = [&](const std::vector<std::string>& args) {
    return resumed_flags(testing::train_flags(args), start).config;
  };
  const TrainFlags plain = resumed({"--resume", "auto"});
  EXPECT_DOUBLE_EQ(plain.train.beta2, 0.99);
  EXPECT_EQ(plain.train.batch_size, 64);
  EXPECT_EQ(plain.train.steps, 40);
  EXPECT_EQ(plain.model.preset, "shakespeare-char");
  EXPECT_EQ(plain.train.sample_prompt, "\n");  // a value of its own line ("\n") read back whole
  EXPECT_EQ(plain.runtime.threads, 0);         // the process's: this run's default, not the checkpoint's 2
  EXPECT_EQ(plain.runtime.resume, "auto");
  EXPECT_EQ(train_flag_table().to_text(plain).find("beta2=0.99\n") != std::string::npos, true);

  const TrainFlags changed = resumed({"--resume", "auto", "--beta2", "0.95", "--steps", "60"});
  EXPECT_DOUBLE_EQ(changed.train.beta2, 0.95);
  EXPECT_EQ(changed.train.steps, 60);
  EXPECT_EQ(resume_changes(start.model->checkpoint->meta.run_config, train_flag_table().to_text(changed)),
            "resuming with changes: --steps 40 -> 60, --beta2 0.99 -> 0.95 (the learning-rate schedule and the data "
            "continue on the new values)");
  EXPECT_EQ(resume_changes(start.model->checkpoint->meta.run_config, train_flag_table().to_text(plain)), "");
  // A new --lr without --min-lr derives its own floor (a tenth), as a fresh run's would.
  EXPECT_FALSE(resumed({"--resume", "auto", "--lr", "5e-4"}).train.min_lr.has_value());
  EXPECT_DOUBLE_EQ(*resumed({"--resume", "auto"}).train.min_lr, 2e-4);  // the checkpoint's, derived from its --lr
  // A stored value the option refuses is named with the checkpoint.
  start.model->checkpoint->meta.run_config = "beta2=1.5\n";
  const std::string bad = invalid_argument_message([&] { resumed({"--resume", "auto"}); });
  EXPECT_NE(bad.find("--resume out/ckpt_00000020.safetensors: its stored options: --beta2 must be in [0, 1)"),
            std::string::npos) << bad;
}

TEST(Checkpoint, StaleTemporariesOfOurOwnAreRemoved) {
  ScratchDir dir;
  dir.write(".ckpt_00000004.safetensors.tmp.4242", "partial");
  dir.write(".ckpt_00000003.pt.tmp.4242", "partial, of a build that named checkpoints .pt");
  dir.write("ckpt_00000005.pt.tmp", "partial, older builds' name");
  dir.write(".notes.tmp.1", "not ours");
  dir.write("ckpt_00000006.safetensors", "not a temporary");
  dir.write("ckpt_00000002.pt", "not a temporary either");
  EXPECT_EQ(remove_stale_checkpoint_temporaries(dir.path()), 3);
  std::vector<std::string> left = file_names(dir.path());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".notes.tmp.1", "ckpt_00000002.pt", "ckpt_00000006.safetensors"}));
}

TEST(Checkpoint, ResumingBeyondTheLastStepIsRefused) {
  ScratchDir dir;
  const TrainingData data = testing::token_data(testing::random_tokens(1500, kVocab, 5), kVocab);
  auto args = [&](const std::string& steps) {
    return std::vector<std::string>{
        "--preset", "tiny",      "--block-size", "16",           "--steps", steps,   "--batch-size",
        "4",        "--seq-len", "16",           "--eval-every", "0",       "--out", dir.path().string(),
        "--device", "cpu"};
  };
  testing::cpu_trainer(args("5"), data)->run(0);
  const Checkpoint five = load_checkpoint(checkpoint_path(dir.path(), 5));
  const std::string message = invalid_argument_message([&] { testing::cpu_trainer(args("3"), data)->restore(five); });
  EXPECT_NE(message.find("step 5, beyond --steps 3"), std::string::npos) << message;
  auto same = testing::cpu_trainer(args("5"), data);
  EXPECT_EQ(same->restore(five), 5);
  EXPECT_EQ(same->run(5).steps_run, 0);  // nothing left to do, and nothing rewritten
}

// A copy of `from` whose metadata entries are replaced by `changes`, every checksum valid again: a file
// that lies consistently, as a hand-edited or hostile one would.
fs::path with_metadata(const fs::path& from, const fs::path& to, const std::map<std::string, std::string>& changes) {
  const SafetensorsReader reader = SafetensorsReader::open(from);
  std::map<std::string, std::string> metadata = reader.metadata();
  for (const auto& [key, value] : changes) metadata[key] = value;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& name : reader.names()) tensors.emplace_back(name, reader.tensor(name));
  std::string all;  // the checkpoint's metadata checksum: every other entry as "key=value\0", in key order
  for (const auto& [key, value] : metadata) {
    if (key != "metadata_checksum") all += key + "=" + value + '\0';
  }
  metadata["metadata_checksum"] = hex64(xxh64(all));
  write_safetensors(to, tensors, metadata);
  return to;
}

TEST(Checkpoint, MetadataClaimsAreCheckedAgainstTheTensorsBeforeAnyModelIsBuilt) {
  ScratchDir dir;
  const fs::path good = save_trained(dir.path() / "good.safetensors");
  // The helper is sound.
  ASSERT_NO_THROW(load_checkpoint(with_metadata(good, dir.path() / "resigned.safetensors", {})));

  GptConfig huge = tiny_config();
  huge.n_layer = 64;
  huge.n_embd = 8192;  // 52 G parameters (200 GB) claimed over a few KB of tensors
  huge.n_head = 16;
  GptConfig wider_vocabulary = tiny_config();
  wider_vocabulary.vocab_size = 1 << 20;
  GptConfig no_bias = tiny_config();
  no_bias.bias = false;
  const std::vector<std::pair<std::map<std::string, std::string>, std::vector<std::string>>> lies = {
      {{{"model_config", huge.to_text()}}, {"does not hold what its metadata claims", "64 layers", "model.wte.weight", "[19, 8192]", "F32 [19, 32]"}},
      {{{"model_config", wider_vocabulary.to_text()}}, {"model_config", "model.wte.weight", "[1048576, "}},
      {{{"model_config", no_bias.to_text()}}, {"has no place for", ".bias"}},
      {{{"tokenizer_data", "abcdefghijklmnopqrstuvwxyz0123456789"}}, {"36 characters", "19 rows"}},
      {{{"tokenizer_kind", "gpt2"}, {"tokenizer_data", "/nowhere"}}, {"GPT-2", "19 vocabulary rows"}},
      {{{"step", "0"}}, {"claims step 0", "optimizer took 1 steps"}},
  };
  for (size_t i = 0; i < lies.size(); ++i) {
    const fs::path lying =
        with_metadata(good, dir.path() / ("lie" + std::to_string(i) + ".safetensors"), lies[i].first);
    std::vector<std::string> needles = lies[i].second;
    needles.push_back(lying.string());
    expect_refused([&] { load_checkpoint(lying); }, needles);
  }
}

}  // namespace
}  // namespace mygpt::checkpoint_test
