#include "model/chunked_lm_loss.h"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>

namespace mygpt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dtype the plain path's matmul runs in. Inside a custom autograd Function autocast would still
// act on each op of the forward (and, depending on where backward() is called, not on the backward),
// so the Function switches autocast off and casts explicitly with the dtype decided here, once.
// Autocast leaves fp64 alone, and so does this.
at::ScalarType matmul_dtype(const torch::Tensor& hidden) {
  const c10::DeviceType device = hidden.device().type();
  if (hidden.scalar_type() != at::kDouble && at::autocast::is_autocast_available(device) &&
      at::autocast::is_autocast_enabled(device)) {
    return at::autocast::get_autocast_dtype(device);
  }
  return hidden.scalar_type();
}

void check_inputs(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "chunked LM loss: hidden (N, C) and weight (V, C) expected, got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == torch::kLong,
              "chunked LM loss: int64 targets (", hidden.size(0), ") expected, got ", targets.sizes());
  TORCH_CHECK(matmul_dtype(hidden) != hidden.scalar_type() || weight.scalar_type() == hidden.scalar_type(),
              "chunked LM loss: hidden and weight dtypes differ outside autocast");
}

int64_t resolve_chunk_rows(int64_t chunk_rows, const torch::Tensor& weight) {
  return chunk_rows > 0 ? chunk_rows : lm_loss_chunk_rows(weight.size(0), weight.size(1));
}

// What one pass over the chunks produces. The gradients are those of the MEAN loss over rows.
struct ChunkedHeadResult {
  torch::Tensor row_losses;   // (N) fp32
  torch::Tensor grad_hidden;  // (N, C) in hidden's dtype; undefined unless asked for
  torch::Tensor grad_weight;  // (V, C) in weight's dtype; undefined unless asked for
};

// Runs the head over chunks of rows. Each chunk's logits live only inside one iteration: they give
// the rows' losses and, when gradients are asked for, turn in place into softmax - onehot, from
// which that chunk's share of both gradients is taken right away.
ChunkedHeadResult run_chunked_head(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t chunk_rows, at::ScalarType dtype,
                                   bool want_grad_hidden, bool want_grad_weight) {
  const int64_t n = hidden.size(0);
  const auto hidden_cast = hidden.to(dtype);
  const auto weight_cast = weight.to(dtype);
  ChunkedHeadResult out;
  out.row_losses = torch::empty({n}, hidden.options().dtype(torch::kFloat));
  if (want_grad_hidden) out.grad_hidden = torch::empty_like(hidden);
  // The weight gradient sums over all chunks; it is accumulated in the weight's dtype (fp32 for our
  // model) even when the matmuls run in bf16, so the sum of many chunks does not lose precision.
  if (want_grad_weight) out.grad_weight = torch::zeros_like(weight);
  const double inverse_rows = 1.0 / static_cast<double>(std::max<int64_t>(n, 1));
  for (int64_t begin = 0; begin < n; begin += chunk_rows) {
    const int64_t end = std::min(n, begin + chunk_rows);
    const auto rows = hidden_cast.slice(0, begin, end);
    const auto target_column = targets.slice(0, begin, end).unsqueeze(1);
    // fp32 logits, a fresh tensor (mm allocates, .to(kFloat) copies bf16), so in-place work is safe.
    auto logits = rows.mm(weight_cast.t()).to(torch::kFloat);
    const auto target_logit = logits.gather(1, target_column);
    // log-sum-exp by hand, so that exp(logits - max) is computed once and reused as the softmax.
    const auto row_max = logits.amax(1, /*keepdim=*/true);
    auto& exp_shifted = logits.sub_(row_max).exp_();
    const auto exp_sum = exp_shifted.sum(1, /*keepdim=*/true);
    out.row_losses.slice(0, begin, end).copy_((row_max + exp_sum.log() - target_logit).squeeze(1));
    if (!want_grad_hidden && !want_grad_weight) continue;
    // d(mean loss)/d(logits) of a row: (softmax - onehot(target)) / N.
    auto& grad_logits = exp_shifted.div_(exp_sum);
    grad_logits.scatter_add_(1, target_column, torch::full({end - begin, 1}, -1.0, grad_logits.options()));
    grad_logits.mul_(inverse_rows);
    const auto grad_logits_cast = grad_logits.to(dtype);
    if (want_grad_hidden) out.grad_hidden.slice(0, begin, end).copy_(grad_logits_cast.mm(weight_cast));
    if (want_grad_weight) {
      if (dtype == out.grad_weight.scalar_type()) {
        out.grad_weight.addmm_(grad_logits_cast.t(), rows);
      } else {
        out.grad_weight.add_(grad_logits_cast.t().mm(rows));  // add_ widens bf16 to fp32 as it adds
      }
    }
  }
  return out;
}

// The head + mean cross-entropy as one autograd node. The forward computes the loss and, in the same
// pass over the chunks, the gradients of the mean loss with respect to hidden and weight; it saves
// those two (N x C and V x C, small) and never the logits. The loss is a scalar, so the backward only
// scales them by the incoming gradient. Computing the gradients here rather than recomputing each
// chunk's logits in the backward saves one of the head's four matmuls and one exp pass over the
// logits (measured on CPU: see docs/BENCHMARKS.md, "Fused LM loss").
class ChunkedLmLossFunction : public torch::autograd::Function<ChunkedLmLossFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& targets, int64_t chunk_rows, at::ScalarType dtype) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    ChunkedHeadResult result =
        run_chunked_head(hidden, weight, targets, chunk_rows, dtype, hidden.requires_grad(), weight.requires_grad());
    ctx->save_for_backward({result.grad_hidden, result.grad_weight});
    return result.row_losses.mean();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto saved = ctx->get_saved_variables();
    // A 0-dim tensor: scaling by it needs no device sync. Out of place, so a retained graph can run
    // its backward again.
    const auto scale = grad_outputs[0];
    auto scaled = [&](const torch::Tensor& grad) {
      return grad.defined() ? grad * scale.to(grad.scalar_type()) : torch::Tensor();
    };
    return {scaled(saved[0]), scaled(saved[1]), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int64_t lm_loss_chunk_rows(int64_t vocab_size, int64_t n_embd) {
  // 64 MiB of fp32 logits per chunk: for GPT-2's 50304 tokens that is 333 rows, so the transient
  // memory of the loss is ~130 MB (one chunk's fp32 logits, which become its softmax and gradient in
  // place, plus their bf16 copies under autocast) instead of GBs.
  constexpr int64_t kChunkLogitsBytes = int64_t{64} << 20;
  const int64_t rows_by_memory = std::max<int64_t>(1, kChunkLogitsBytes / (std::max<int64_t>(vocab_size, 1) * 4));
  // Every chunk that computes gradients reads and writes the whole V x C weight gradient. With at least C
  // rows per chunk that traffic stays below the chunk's own (rows x V) logits traffic, so wide
  // models (C = 768 and up) take somewhat larger chunks rather than become bound by that sum.
  return std::max(rows_by_memory, n_embd);
}

torch::Tensor chunked_lm_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                              int64_t chunk_rows) {
  check_inputs(hidden, weight, targets);
  const bool gradient_wanted = torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  if (!gradient_wanted) return chunked_lm_token_losses(hidden, weight, targets, chunk_rows).mean();
  return ChunkedLmLossFunction::apply(hidden, weight, targets, resolve_chunk_rows(chunk_rows, weight),
                                      matmul_dtype(hidden));
}

torch::Tensor chunked_lm_token_losses(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, int64_t chunk_rows) {
  check_inputs(hidden, weight, targets);
  const at::ScalarType dtype = matmul_dtype(hidden);
  torch::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return run_chunked_head(hidden, weight, targets, resolve_chunk_rows(chunk_rows, weight), dtype, false, false)
      .row_losses;
}

}  // namespace mygpt
