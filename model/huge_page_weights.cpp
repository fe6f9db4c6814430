#include "model/huge_page_weights.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace mygpt {

#ifdef __linux__
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kAlignment = 64;  // a cache line (and every vector load's width)

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The mapping lives as long as any tensor placed in it (each holds a reference in its deleter).
struct Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, bytes);
  }
};

}  // namespace

std::string move_weights_to_huge_pages(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors;  // those to move: CPU tensors with data
  for (const auto& group : {module.parameters(), module.buffers()}) {
    for (const auto& t : group) {
      if (t.defined() && t.device().is_cpu() && t.numel() > 0) tensors.push_back(t);
    }
  }
  size_t bytes = 0;
  for (const auto& t : tensors) bytes = round_up(bytes, kAlignment) + t.nbytes();
  if (bytes == 0) return "no CPU weights to place";
  // One huge page more than needed, so the start can be moved to a 2 MiB boundary.
  auto mapping = std::make_shared<Mapping>();
  mapping->bytes = round_up(bytes, kHugePage) + kHugePage;
  mapping->base = mmap(nullptr, mapping->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping->base == MAP_FAILED) return "weights stay in 4 KiB pages: mmap of the copy failed";
  auto* start = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(mapping->base), kHugePage));
  const bool advised = madvise(start, round_up(bytes, kHugePage), MADV_HUGEPAGE) == 0;
  size_t offset = 0;
  for (auto& t : tensors) {
    offset = round_up(offset, kAlignment);
    auto copy = torch::from_blob(
        start + offset, t.sizes(), [mapping](void*) {}, t.options().requires_grad(false));
    copy.copy_(t);
    t.set_data(copy);
    offset += t.nbytes();
  }
  char size[32];
  std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return std::string(size) + " of weights in memory advised for huge pages" +
         (advised ? "" : " (the kernel refused the advice: 4 KiB pages)");
}
#else
std::string move_weights_to_huge_pages(torch::nn::Module&) { return "weights stay as loaded: huge pages are asked for on Linux only"; }
#endif

}  // namespace mygpt
