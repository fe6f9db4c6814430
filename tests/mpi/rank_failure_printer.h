#pragma once
// The multi-rank test binaries' GoogleTest output: rank 0 prints as usual; every other rank prints only its
// failures, each line naming the rank, so that a job's output is one report and not one per rank.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

namespace mygpt {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    print(std::string(result.file_name() ? result.file_name() : "?") + ":" + std::to_string(result.line_number()) +
          ": failure\n" + result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) print(std::string("FAILED ") + info.test_suite_name() + "." + info.name());
  }

 private:
  // One write per report: std::cerr flushes after every <<, and other ranks' output would cut in.
  void print(const std::string& text) const {
    std::cerr << ("rank " + std::to_string(rank_) + ": " + text + "\n") << std::flush;
  }
  int rank_;
};

// On a rank other than 0, GoogleTest's own printer gives way to a RankFailurePrinter.
inline void print_only_failures_off_rank_zero(int rank) {
  if (rank == 0) return;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankFailurePrinter(rank));
}

}  // namespace mygpt
