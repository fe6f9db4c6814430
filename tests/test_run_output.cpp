// The run's records: metrics rows carry wall-clock time and elapsed seconds, and a resumed run cuts the
// rows it is about to write again (and a torn last line) before appending.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/scratch_dir.h"
#include "trainer/run_output.h"

namespace mygpt::run_output_test {
namespace {

std::vector<nlohmann::json> rows_of(const std::filesystem::path& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(RunOutput, MetricsRowsCarryTimeAndElapsedSeconds) {
  ScratchDir dir;
  RunOutput out = RunOutput::for_rank(0, dir.path());
  out.open_metrics(/*resume=*/false);
  out.metrics({{"step", 0}, {"loss", 2.5}});
  out.metrics({{"step", 1}, {"loss", 2.4}});
  const auto rows = rows_of(dir.path() / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    ASSERT_TRUE(row.contains("time"));
    EXPECT_EQ(row["time"].get<std::string>().size(), std::string("2026-11-22T12:00:00.000Z").size());
    EXPECT_EQ(row["time"].get<std::string>().back(), 'Z');
    ASSERT_TRUE(row.contains("elapsed_s"));
    EXPECT_GE(row["elapsed_s"].get<double>(), 0.0);
  }
  EXPECT_LE(rows[0]["elapsed_s"].get<double>(), rows[1]["elapsed_s"].get<double>());
}

TEST(RunOutput, ResumingCutsTheRowsAfterTheCheckpointAndATornLine) {
  ScratchDir dir;
  {
    std::ofstream metrics(dir.path() / "metrics.jsonl");
    for (int step = 0; step < 6; ++step) {
      metrics << nlohmann::json{{"step", step}, {"loss", 1.0}, {"elapsed_s", 10.0 + step}}.dump() << "\n";
    }
    metrics << nlohmann::json{{"step", 4}, {"val_loss", 1.5}, {"elapsed_s", 16.0}}.dump() << "\n";
    metrics << "{\"step\": 6, \"lo";  // killed mid-write
  }
  RunOutput out = RunOutput::for_rank(0, dir.path());
  out.open_metrics(/*resume=*/true, /*resume_step=*/4);
  out.metrics({{"step", 4}, {"loss", 0.9}});
  const auto rows = rows_of(dir.path() / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 5u);  // steps 0..3 kept, then the resumed run's step 4 once
  for (int step = 0; step < 5; ++step) EXPECT_EQ(rows[static_cast<size_t>(step)]["step"].get<int>(), step);
  EXPECT_EQ(rows[4]["loss"].get<double>(), 0.9);
  // Elapsed time goes on from the last kept row (step 3 at 13 s).
  EXPECT_GE(rows[4]["elapsed_s"].get<double>(), 13.0);
  EXPECT_LT(rows[4]["elapsed_s"].get<double>(), 15.0);
}

TEST(RunOutput, OnlyRankZeroWrites) {
  ScratchDir dir;
  RunOutput out = RunOutput::for_rank(1, dir.path() / "out");
  out.open_metrics(/*resume=*/false);
  out.metrics({{"step", 0}});
  out.write_record("run.json", {{"a", 1}});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

}  // namespace
}  // namespace mygpt::run_output_test
