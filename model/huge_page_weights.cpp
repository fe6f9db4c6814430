#include "model/huge_page_weights.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
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

// The mappings made so far that still hold tensors, so that a second call leaves their tensors alone.
std::mutex placed_mutex;
std::vector<std::weak_ptr<Mapping>> placed;

bool already_placed(const torch::Tensor& t) {
  const auto* data = static_cast<const char*>(t.data_ptr());
  const std::lock_guard<std::mutex> lock(placed_mutex);
  for (const auto& weak : placed) {
    if (const auto mapping = weak.lock()) {
      const auto* base = static_cast<const char*>(mapping->base);
      if (data >= base && data < base + mapping->bytes) return true;
    }
  }
  return false;
}

std::string place(torch::nn::Module& module, bool keep_values) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors;  // those to move: CPU tensors with data, not placed before
  size_t placed_bytes = 0;
  for (const auto& group : {module.parameters(), module.buffers()}) {
    for (const auto& t : group) {
      if (!t.defined() || !t.device().is_cpu() || t.numel() == 0) continue;
      if (already_placed(t)) {
        placed_bytes += t.nbytes();
      } else {
        tensors.push_back(t);
      }
    }
  }
  if (tensors.empty() && placed_bytes > 0) {
    char size[32];
    std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(placed_bytes) / (1 << 20));
    return std::string(size) + " of weights in memory advised for huge pages (loaded there)";
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
    if (keep_values) copy.copy_(t);
    t.set_data(copy);
    offset += t.nbytes();
  }
  char size[32];
  std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  {
    const std::lock_guard<std::mutex> lock(placed_mutex);
    placed.push_back(mapping);
  }
  return std::string(size) + " of weights in memory advised for huge pages" +
         (advised ? "" : " (the kernel refused the advice: 4 KiB pages)");
}

}  // namespace

std::string move_weights_to_huge_pages(torch::nn::Module& module) { return place(module, /*keep_values=*/true); }
std::string place_weights_in_huge_pages(torch::nn::Module& module) { return place(module, /*keep_values=*/false); }
#else
std::string move_weights_to_huge_pages(torch::nn::Module&) { return "weights stay as loaded: huge pages are asked for on Linux only"; }
std::string place_weights_in_huge_pages(torch::nn::Module&) { return "weights stay as loaded: huge pages are asked for on Linux only"; }
#endif

}  // namespace mygpt
