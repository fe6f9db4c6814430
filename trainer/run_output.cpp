#include "trainer/run_output.h"

#include <cerrno>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "common/file_io.h"

namespace mygpt {

RunOutput RunOutput::for_rank(int rank, std::filesystem::path out_dir) {
  return RunOutput(rank == 0, std::move(out_dir));
}

void RunOutput::print(const std::string& line) const {
  if (writes_) std::cout << line << std::endl;  // flushed: progress must show up under mpirun and pipes
}

void RunOutput::open_metrics(bool append) {
  if (!writes_) return;
  create_output_directory(out_dir_, "--out");
  const auto path = out_dir_ / "metrics.jsonl";
  metrics_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!metrics_) throw std::runtime_error("cannot write " + path.string());
}

void RunOutput::metrics(const nlohmann::json& record) {
  if (!writes_ || !metrics_.is_open()) return;
  metrics_ << record.dump() << '\n';
  metrics_.flush();
  // A full disk must stop the run with a message, not leave a silently empty record.
  if (!metrics_) {
    throw OutputFileError("cannot write " + (out_dir_ / "metrics.jsonl").string() + ": " + std::strerror(errno));
  }
}

}  // namespace mygpt
