#pragma once
// The single place that decides whether this process speaks: rank 0 prints progress and writes
// metrics, checkpoints and samples; every other rank stays silent (errors go to stderr elsewhere).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/strprintf.h"

namespace mygpt {

// The wall clock as "2026-11-22T12:00:00.000Z".
std::string utc_now_iso8601();

class RunOutput {
 public:
  // The one decision: only rank 0 writes.
  static RunOutput for_rank(int rank, std::filesystem::path out_dir);

  bool writes() const { return writes_; }
  const std::filesystem::path& out_dir() const { return out_dir_; }

  void print(const std::string& line) const;
  // Opens <out>/metrics.jsonl: truncated for a fresh run. Resuming at step K, the rows of steps K and
  // later (written after that checkpoint by the run that stopped, and about to be written again) and a
  // torn last line are cut away first, atomically, and the rest is appended to.
  void open_metrics(bool resume, int64_t resume_step = 0);
  // Writes one row, adding "time" (UTC, ISO 8601) and "elapsed_s" (wall seconds since the run began;
  // a resumed run continues from its last kept row).
  void metrics(nlohmann::json record);
  // Writes <out>/<name> whole (temporary file, rename), rank 0 only: run.json.
  void write_record(const std::string& name, const nlohmann::json& record) const;

 private:
  RunOutput(bool writes, std::filesystem::path out_dir) : writes_(writes), out_dir_(std::move(out_dir)) {}
  bool writes_;
  std::filesystem::path out_dir_;
  std::ofstream metrics_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  double elapsed_before_ = 0;  // seconds of the runs this one resumes
};

}  // namespace mygpt
