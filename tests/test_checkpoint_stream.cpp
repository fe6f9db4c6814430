// Checkpoints that stream (trainer/checkpoint.h's save_checkpoint_streamed, SafetensorsStreamWriter,
// trainer/sharded_gather.h) in one process: the streamed file is byte for byte the one written whole,
// each entry is produced once, in the file's order, and a sharded tensor is assembled only from pieces
// that cover it. The multi-rank side (rank 0's peak RSS while saving) is tests/mpi/test_mpi_checkpoint.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "model/hf/safetensors_file.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "trainer/checkpoint.h"
#include "trainer/sharded_gather.h"

namespace mygpt::checkpoint_stream_test {
namespace {

namespace fs = std::filesystem;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::pair<std::string, torch::Tensor>> mixed_tensors() {
  return {{"b.long", torch::arange(5, torch::kLong)},
          {"a.float", torch::randn({3, 4})},
          {"c.byte", torch::arange(7, torch::kLong).to(torch::kByte)},
          {"d.half", torch::randn({2, 2}).to(torch::kHalf)},
          {"e.scalar", torch::tensor(2.5, torch::kDouble)}};
}

TEST(SafetensorsStream, WritesTheBytesOfAWholeWrite) {
  ScratchDir dir;
  const auto tensors = mixed_tensors();
  const std::map<std::string, std::string> metadata = {{"sum", "0123456789abcdef"}, {"note", "x"}};
  write_safetensors(dir.path() / "whole.safetensors", tensors, metadata);
  std::vector<SafetensorsLayoutEntry> layout;
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& [name, t] : tensors) {
    layout.push_back({name, t.scalar_type(), t.sizes().vec()});
    by_name[name] = t;
  }
  // Placeholders as long as the final values.
  SafetensorsStreamWriter writer(dir.path() / "streamed.safetensors", layout, {{"sum", "................"}, {"note", "?"}});
  // The data order: element size, largest first, then by name.
  std::vector<std::string> order;
  for (const auto& entry : writer.order()) order.push_back(entry.name);
  EXPECT_EQ(order, (std::vector<std::string>{"b.long", "e.scalar", "a.float", "d.half", "c.byte"}));
  for (const auto& entry : writer.order()) writer.write_next(by_name.at(entry.name));
  writer.finish(metadata);
  EXPECT_EQ(file_bytes(dir.path() / "streamed.safetensors"), file_bytes(dir.path() / "whole.safetensors"));
}

TEST(SafetensorsStream, RefusesWhatDoesNotFitItsLayoutAndLeavesNoFile) {
  ScratchDir dir;
  const fs::path path = dir.path() / "x.safetensors";
  {
    SafetensorsStreamWriter writer(path, {{"a", torch::kFloat, {2}}}, {{"k", "v"}});
    EXPECT_THROW(writer.write_next(torch::zeros({3})), std::logic_error);       // another shape
    EXPECT_THROW(writer.finish({{"k", "v"}}), std::logic_error);               // a tensor missing
    writer.write_next(torch::zeros({2}));
    EXPECT_THROW(writer.finish({{"k", "a longer value"}}), std::logic_error);  // does not fit the header
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_THROW(SafetensorsStreamWriter(path, {{"a", torch::kFloat, {1}}, {"a", torch::kFloat, {1}}}, {}),
               std::invalid_argument);
}

TEST(StreamedCheckpoint, ProducesEachEntryOnceInFileOrderAndLoads) {
  ScratchDir dir;
  const GptConfig config = testing::small_config(11, 8);
  Gpt model(config);
  std::vector<CheckpointEntry> entries;
  std::vector<std::string> produced;
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor t = item.value();
    const std::string name = "model." + item.key();
    entries.push_back({name, t.scalar_type(), t.sizes().vec(), [&produced, name, t] {
                         produced.push_back(name);
                         return t;
                       }});
  }
  const torch::Tensor world = torch::tensor({int64_t{1}});
  entries.push_back({"world_size", torch::kLong, {1}, [&produced, world] {
                       produced.push_back("world_size");
                       return world;
                     }});
  const fs::path path = dir.path() / "ckpt_00000003.safetensors";
  save_checkpoint_streamed(path, CheckpointMeta{config, TokenizerKind::none, "", 3, "steps=3\n"}, entries, true);
  ASSERT_EQ(produced.size(), entries.size());
  EXPECT_EQ(produced.front(), "world_size");  // 8-byte elements come first in the file
  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.meta.step, 3);
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(torch::equal(loaded.tensors.at("model." + item.key()), item.value())) << item.key();
  }
  // A rank that does not write produces every entry alike (its collectives) and writes nothing.
  produced.clear();
  save_checkpoint_streamed(dir.path() / "other.safetensors", loaded.meta, entries, false);
  EXPECT_EQ(produced.size(), entries.size());
  EXPECT_FALSE(fs::exists(dir.path() / "other.safetensors"));
  // The same file as the whole-state save.
  StateDict whole;
  for (const auto& item : model->named_parameters()) whole["model." + item.key()] = item.value();
  whole["world_size"] = world;
  save_checkpoint(dir.path() / "whole.safetensors", loaded.meta, whole);
  EXPECT_EQ(file_bytes(dir.path() / "whole.safetensors"), file_bytes(path));
}

TEST(StreamedCheckpoint, GathersAShardedTensorOnlyWhenItsPiecesCoverIt) {
  LocalCommunicator one;
  const torch::Tensor values = torch::arange(12, torch::kFloat);
  const torch::Tensor whole = gather_sharded_tensor(one, {"m", {3, 4}, torch::kFloat, 0, values}, 0);
  EXPECT_TRUE(torch::equal(whole, values.view({3, 4})));
  EXPECT_THROW(gather_sharded_tensor(one, {"m", {3, 4}, torch::kFloat, 0, values.slice(0, 0, 11)}, 0),
               std::logic_error);
  EXPECT_THROW(gather_sharded_tensor(one, {"m", {3, 4}, torch::kFloat, 1, values.slice(0, 0, 11)}, 0),
               std::logic_error);
  EXPECT_THROW(gather_sharded_tensor(one, {"m", {12}, torch::kDouble, 0, values}, 0), std::logic_error);
}

}  // namespace
}  // namespace mygpt::checkpoint_stream_test
