#include "trainer/rank_consistency.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "common/checksum.h"
#include "common/strprintf.h"
#include "distributed/rank_zero_reports.h"

namespace mygpt {

namespace {

// MYGPT_TEST_PERTURB_RANK=RANK:STEP for this rank: the step after which it perturbs its parameters.
std::optional<int64_t> planted_difference(int rank) {
  const char* spec = std::getenv("MYGPT_TEST_PERTURB_RANK");
  if (spec == nullptr || *spec == '\0') return std::nullopt;
  long long r = -1, step = -1;
  char tail = 0;
  if (std::sscanf(spec, "%lld:%lld%c", &r, &step, &tail) != 2 || r < 0 || step < 0) {
    throw std::invalid_argument(std::string("MYGPT_TEST_PERTURB_RANK: expected RANK:STEP, got '") + spec + "'");
  }
  return r == rank ? std::optional<int64_t>(step) : std::nullopt;
}

// The next float after the first value of the first parameter: the smallest difference there is.
void perturb(const torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  const torch::Tensor first = model.parameters().front().view({-1})[0];
  const float value = first.item<float>();
  first.fill_(std::nextafter(value, value + 1.0f));
}

}  // namespace

uint64_t tensors_checksum(const std::vector<torch::Tensor>& tensors) {
  uint64_t hash = 0;
  for (const torch::Tensor& t : tensors) {
    const torch::Tensor host = t.detach().to(torch::kCPU).contiguous();
    hash = xxh64(host.data_ptr(), host.numel() * host.element_size(), hash);
  }
  return hash;
}

std::string rank_checksums_text(const std::vector<uint64_t>& checksum_of_rank) {
  std::map<uint64_t, std::vector<int>> ranks_of;
  for (size_t r = 0; r < checksum_of_rank.size(); ++r) ranks_of[checksum_of_rank[r]].push_back(static_cast<int>(r));
  std::vector<std::pair<uint64_t, std::vector<int>>> groups(ranks_of.begin(), ranks_of.end());
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.second.size() != b.second.size() ? a.second.size() > b.second.size() : a.second < b.second;
  });
  std::string text;
  for (const auto& [checksum, ranks] : groups) {
    std::string names;
    for (int r : ranks) names += (names.empty() ? "" : ", ") + std::to_string(r);
    text += (text.empty() ? "" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") + names +
            (ranks.size() == 1 ? " holds " : " hold ") + "parameters of checksum " + hex64(checksum);
  }
  return text;
}

RankConsistencyCheck::RankConsistencyCheck(Communicator& comm, int64_t every)
    : comm_(comm), every_(every), perturb_after_step_(planted_difference(comm.rank())) {}

void RankConsistencyCheck::after_step(int64_t step, const torch::nn::Module& model,
                                     const std::function<std::vector<torch::Tensor>()>& whole) {
  if (perturb_after_step_ == step) perturb(model);
  const int64_t steps_done = step + 1;
  if (every_ <= 0 || comm_.world_size() == 1 || steps_done % every_ != 0) return;
  // The 64-bit checksum as four 16-bit parts in fp32 (exact), so that any backend sums the gather's
  // zero-padded table exactly, on the parameters' device (NCCL takes CUDA tensors only).
  const uint64_t mine = tensors_checksum(whole ? whole() : model.parameters());
  auto parts = torch::empty({4}, torch::kFloat);
  for (int i = 0; i < 4; ++i) parts.data_ptr<float>()[i] = static_cast<float>((mine >> (16 * i)) & 0xFFFF);
  const torch::Tensor rows =
      comm_.gather_rows(parts.to(model.parameters().front().device())).to(torch::kCPU).contiguous();
  const float* part = rows.data_ptr<float>();
  std::vector<uint64_t> checksum_of_rank(static_cast<size_t>(comm_.world_size()));
  for (size_t r = 0; r < checksum_of_rank.size(); ++r) {
    for (size_t i = 0; i < 4; ++i) checksum_of_rank[r] |= static_cast<uint64_t>(part[r * 4 + i]) << (16 * i);
  }
  if (std::all_of(checksum_of_rank.begin(), checksum_of_rank.end(),
                  [&](uint64_t c) { return c == checksum_of_rank.front(); })) {
    return;
  }
  if (comm_.rank() != 0) end_as_rank_zero_reports(comm_, 1);
  throw std::runtime_error(strprintf("after step %lld the ranks hold different parameters (--check-ranks-every %lld): ",
                                     static_cast<long long>(step), static_cast<long long>(every_)) +
                           rank_checksums_text(checksum_of_rank));
}

}  // namespace mygpt
