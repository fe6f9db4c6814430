#pragma once
// The single place that decides whether this process speaks: rank 0 prints progress and writes
// metrics, checkpoints and samples; every other rank stays silent (errors go to stderr elsewhere).
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/strprintf.h"

namespace mygpt {

class RunOutput {
 public:
  // The one decision: only rank 0 writes.
  static RunOutput for_rank(int rank, std::filesystem::path out_dir);

  bool writes() const { return writes_; }
  const std::filesystem::path& out_dir() const { return out_dir_; }

  void print(const std::string& line) const;
  // Opens <out>/metrics.jsonl: truncated for a fresh run, appended to when resuming.
  void open_metrics(bool append);
  void metrics(const nlohmann::json& record);

 private:
  RunOutput(bool writes, std::filesystem::path out_dir) : writes_(writes), out_dir_(std::move(out_dir)) {}
  bool writes_;
  std::filesystem::path out_dir_;
  std::ofstream metrics_;
};

}  // namespace mygpt
