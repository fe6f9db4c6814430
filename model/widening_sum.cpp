#include "model/widening_sum.h"

#include <atomic>
#include <mutex>

namespace mygpt {
namespace {

std::atomic<WideningSumPath> path_taken{WideningSumPath::not_run};
std::mutex refusal_mutex;
std::string refusal;  // ATen's first line, kept for the note

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

void add_product_widening(torch::Tensor& sum, const torch::Tensor& a, const torch::Tensor& b) {
  if (path_taken.load(std::memory_order_relaxed) != WideningSumPath::separate_pass) {
    try {
      at::addmm_out(sum, sum, a, b, sum.scalar_type());
      path_taken.store(WideningSumPath::in_place, std::memory_order_relaxed);
      return;
    } catch (const c10::Error& e) {
      // ATen checks the dtypes before it writes anything, so `sum` is untouched here.
      std::lock_guard<std::mutex> lock(refusal_mutex);
      if (refusal.empty()) refusal = first_line(e.what_without_backtrace());
      path_taken.store(WideningSumPath::separate_pass, std::memory_order_relaxed);
    }
  }
  sum.add_(a.mm(b));
}

WideningSumPath widening_sum_path() { return path_taken.load(std::memory_order_relaxed); }

std::string widening_sum_note() {
  if (widening_sum_path() != WideningSumPath::separate_pass) return "";
  std::lock_guard<std::mutex> lock(refusal_mutex);
  return "note: the loss kernel's weight gradient is summed by a separate pass (a 16-bit product, then an fp32 "
         "add), not by the widening addmm, which ATen refused (" +
         refusal + "): this run measures the separate pass";
}

}  // namespace mygpt
