#include "trainer/run_output.h"

#include <cstdarg>
#include <cstdio>
#include <iostream>
#include <stdexcept>

namespace mygpt {

RunOutput RunOutput::for_rank(int rank, std::filesystem::path out_dir) {
  return RunOutput(rank == 0, std::move(out_dir));
}

void RunOutput::print(const std::string& line) const {
  if (writes_) std::cout << line << std::endl;  // flushed: progress must show up under mpirun and pipes
}

void RunOutput::open_metrics(bool append) {
  if (!writes_) return;
  std::filesystem::create_directories(out_dir_);
  const auto path = out_dir_ / "metrics.jsonl";
  metrics_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!metrics_) throw std::runtime_error("cannot write " + path.string());
}

void RunOutput::metrics(const nlohmann::json& record) {
  if (!writes_ || !metrics_.is_open()) return;
  metrics_ << record.dump() << '\n';
  metrics_.flush();
}

std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

}  // namespace mygpt
