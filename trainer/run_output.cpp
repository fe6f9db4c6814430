#include "trainer/run_output.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "common/file_io.h"

namespace mygpt {

RunOutput RunOutput::for_rank(int rank, std::filesystem::path out_dir) {
  return RunOutput(rank == 0, std::move(out_dir));
}

void RunOutput::print(const std::string& line) const {
  if (writes_) std::cout << line << std::endl;  // flushed: progress must show up under mpirun and pipes
}

std::string utc_now_iso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return strprintf("%s.%03lldZ", text, static_cast<long long>(millis));
}

void RunOutput::open_metrics(bool resume, int64_t resume_step) {
  if (!writes_) return;
  create_output_directory(out_dir_, "--out");
  const auto path = out_dir_ / "metrics.jsonl";
  std::error_code ec;
  if (resume && std::filesystem::exists(path, ec)) {
    std::string kept;
    std::istringstream rows(read_whole_file(path, "metrics file"));
    for (std::string line; std::getline(rows, line);) {
      const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!row.is_object() || !row.contains("step") || !row["step"].is_number_integer()) continue;  // torn
      if (row["step"].get<int64_t>() >= resume_step) continue;
      kept += line + "\n";
      if (row.contains("elapsed_s") && row["elapsed_s"].is_number()) elapsed_before_ = row["elapsed_s"].get<double>();
    }
    write_file_atomically(path, kept);
  }
  started_ = std::chrono::steady_clock::now();
  metrics_.open(path, resume ? std::ios::app : std::ios::trunc);
  if (!metrics_) throw OutputFileError("cannot write " + path.string() + ": " + std::strerror(errno));
}

void RunOutput::metrics(nlohmann::json record) {
  if (!writes_ || !metrics_.is_open()) return;
  record["time"] = utc_now_iso8601();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  record["elapsed_s"] = std::round((elapsed_before_ + elapsed) * 1000.0) / 1000.0;
  // A sample may end inside a UTF-8 character (a GPT-2 token is bytes): replace, never throw.
  metrics_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  metrics_.flush();
  // A full disk must stop the run with a message, not leave a silently empty record.
  if (!metrics_) {
    throw OutputFileError("cannot write " + (out_dir_ / "metrics.jsonl").string() + ": " + std::strerror(errno));
  }
}

void RunOutput::write_record(const std::string& name, const nlohmann::json& record) const {
  if (!writes_) return;
  create_output_directory(out_dir_, "--out");
  write_file_atomically(out_dir_ / name, record.dump(2) + "\n");
}

}  // namespace mygpt
