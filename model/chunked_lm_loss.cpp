#include "model/chunked_lm_loss.h"

#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <stdexcept>

#include "model/lm_loss_cpu.h"
#include "model/lm_loss_cuda.h"
#include "model/widening_sum.h"

namespace mygpt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dtype the plain path's matmul runs in. Inside a custom autograd Function autocast would still
// act on each op of the forward (and, depending on where backward() is called, not on the backward),
// so the Function switches autocast off and casts explicitly with the dtype decided here, once.
// Autocast leaves fp64 alone, and so does this.
bool autocast_applies(const torch::Tensor& hidden) {
  const c10::DeviceType device = hidden.device().type();
  return hidden.scalar_type() != at::kDouble && at::autocast::is_autocast_available(device) &&
         at::autocast::is_autocast_enabled(device);
}

at::ScalarType matmul_dtype(const torch::Tensor& hidden) {
  return autocast_applies(hidden) ? at::autocast::get_autocast_dtype(hidden.device().type()) : hidden.scalar_type();
}

void check_inputs(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "chunked LM loss: hidden (N, C) and weight (V, C) expected, got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == torch::kLong,
              "chunked LM loss: int64 targets (", hidden.size(0), ") expected, got ", targets.sizes());
  // Under autocast the hidden states may already be 16-bit (the CUDA LayerNorm writes the autocast dtype)
  // while the head's weight is fp32: both are cast to the matmul's dtype.
  TORCH_CHECK(autocast_applies(hidden) || weight.scalar_type() == hidden.scalar_type(),
              "chunked LM loss: hidden and weight dtypes differ outside autocast");
}

// What the options resolve to for these inputs.
struct ChunkPlan {
  int64_t chunk_rows = 0;
  bool cuda_kernel = false;
  at::ScalarType dtype = at::kFloat;  // the matmuls' dtype
  // fp16 flushes values below ~6e-8 to zero, and softmax / N (N rows, thousands) has many of them: in
  // fp16 the chunks work with the gradient of the SUM of the rows' losses (entries in [-1, 1]) and the
  // 1/N is applied in fp32, in the backward. bf16 has fp32's range and keeps the mean's gradient.
  bool sum_gradients = false;
  double logit_softcap = 0.0;  // > 0: the logits are cap * tanh(logits / cap) before the softmax
};

ChunkPlan plan_chunks(const LmLossOptions& options, const torch::Tensor& hidden, const torch::Tensor& weight,
                      double logit_softcap) {
  ChunkPlan plan;
  plan.logit_softcap = logit_softcap;
  plan.chunk_rows = options.chunk_rows > 0 ? options.chunk_rows
                                           : lm_loss_chunk_rows(weight.size(0), weight.size(1), hidden.device().type());
  // The CUDA kernel has no soft-cap: a capped head runs the ATen path (the cap is a few elementwise
  // passes over each chunk's logits).
  plan.cuda_kernel = options.cuda_kernel && hidden.is_cuda() && logit_softcap <= 0.0;
  if (plan.cuda_kernel && !lm_loss_cuda_kernel_built()) {
    throw std::invalid_argument("the CUDA loss kernel is not built into this binary (nvcc was not found when it "
                                "was configured); use the ATen loss");
  }
  plan.dtype = matmul_dtype(hidden);
  plan.sum_gradients = plan.dtype == at::kHalf;
  return plan;
}

// What one pass over the chunks produces. The gradients are those of the MEAN loss over rows, or of
// their sum with plan.sum_gradients.
struct ChunkedHeadResult {
  torch::Tensor row_losses;   // (N) fp32
  torch::Tensor grad_hidden;  // (N, C) in hidden's dtype; undefined unless asked for
  torch::Tensor grad_weight;  // (V, C) in weight's dtype; undefined unless asked for
};

// One chunk's losses into `losses` and, when wanted, its d(mean loss)/d(logits) in the matmul dtype,
// on a CPU by the row-at-a-time loops of model/lm_loss_cpu (fp32 logits, one copy from bf16 or fp16).
torch::Tensor chunk_losses_cpu(const torch::Tensor& logits_cast, const torch::Tensor& targets, torch::Tensor losses,
                               double grad_scale, bool want_grad, double logit_softcap) {
  auto logits = logits_cast.to(torch::kFloat);  // fresh (mm allocates, .to copies), so in place is safe
  lm_loss_rows_cpu_(logits, targets, losses, grad_scale, want_grad, logit_softcap);
  if (!want_grad) return {};
  return logits.to(logits_cast.scalar_type());
}

// The same by ATen ops, on other devices and in fp64: fp32 logits whose exp is computed once and reused
// as the softmax, then turned in place into (softmax - onehot) / N.
// With a soft-cap the logits are cap * tanh(z / cap) of the head's z, and the gradient with respect
// to z is that with respect to the capped logits times 1 - tanh^2.
torch::Tensor chunk_losses_aten(const torch::Tensor& logits_cast, const torch::Tensor& targets, torch::Tensor losses,
                                double grad_scale, bool want_grad, double logit_softcap) {
  // fp32 logits, a fresh tensor (mm allocates, .to(kFloat) copies bf16), so in-place work is safe.
  auto logits = logits_cast.to(torch::kFloat);
  torch::Tensor capped_tanh;
  if (logit_softcap > 0.0) {
    capped_tanh = logits.div(logit_softcap).tanh_();  // transformers' order: divide, tanh, multiply
    logits = capped_tanh * logit_softcap;
  }
  const auto target_column = targets.unsqueeze(1);
  const auto target_logit = logits.gather(1, target_column);
  const auto row_max = logits.amax(1, /*keepdim=*/true);
  auto& exp_shifted = logits.sub_(row_max).exp_();
  const auto exp_sum = exp_shifted.sum(1, /*keepdim=*/true);
  losses.copy_((row_max + exp_sum.log() - target_logit).squeeze(1));
  if (!want_grad) return {};
  auto& grad_logits = exp_shifted.div_(exp_sum);
  grad_logits.scatter_add_(1, target_column, torch::full({logits.size(0), 1}, -1.0, grad_logits.options()));
  grad_logits.mul_(grad_scale);
  if (capped_tanh.defined()) grad_logits.mul_(1.0 - capped_tanh.square_());
  return grad_logits.to(logits_cast.scalar_type());
}

// Runs the head over chunks of rows. Each chunk's logits live only inside one iteration: they give
// the rows' losses and, when gradients are asked for, turn into softmax - onehot, from which that
// chunk's share of both gradients is taken right away.
ChunkedHeadResult run_chunked_head(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, const ChunkPlan& plan, bool want_grad_hidden,
                                   bool want_grad_weight) {
  const int64_t n = hidden.size(0);
  const auto hidden_cast = hidden.to(plan.dtype);
  const auto weight_cast = weight.to(plan.dtype);
  const auto targets_contiguous = targets.contiguous();
  const bool want_grad = want_grad_hidden || want_grad_weight;
  ChunkedHeadResult out;
  out.row_losses = torch::empty({n}, hidden.options().dtype(torch::kFloat));
  if (want_grad_hidden) out.grad_hidden = torch::empty_like(hidden);
  // The weight gradient sums over all chunks; it is accumulated in the weight's dtype (fp32 for our
  // model) even when the matmuls run in bf16, so the sum of many chunks does not lose precision. In the
  // weight's own dtype the first chunk's product is the sum so far (no zeroed V x C tensor to add to).
  const bool widening_sum = want_grad_weight && plan.dtype != weight.scalar_type();
  if (widening_sum) out.grad_weight = torch::zeros_like(weight);
  const double grad_scale = plan.sum_gradients ? 1.0 : 1.0 / static_cast<double>(std::max<int64_t>(n, 1));
  for (int64_t begin = 0; begin < n; begin += plan.chunk_rows) {
    const int64_t end = std::min(n, begin + plan.chunk_rows);
    const auto rows = hidden_cast.slice(0, begin, end);
    const auto chunk_targets = targets_contiguous.slice(0, begin, end);
    auto losses = out.row_losses.slice(0, begin, end);
    auto logits = rows.mm(weight_cast.t());
    torch::Tensor grad_logits;  // in plan.dtype
    if (plan.cuda_kernel) {
      lm_loss_rows_cuda_(logits, chunk_targets, losses, grad_scale, want_grad);
      grad_logits = logits;
    } else if (logits.is_cpu() && logits.scalar_type() != at::kDouble) {
      grad_logits = chunk_losses_cpu(logits, chunk_targets, losses, grad_scale, want_grad, plan.logit_softcap);
    } else {
      grad_logits = chunk_losses_aten(logits, chunk_targets, losses, grad_scale, want_grad, plan.logit_softcap);
    }
    if (!want_grad) continue;
    if (want_grad_hidden) out.grad_hidden.slice(0, begin, end).copy_(grad_logits.mm(weight_cast));
    if (!want_grad_weight) continue;
    if (!widening_sum) {
      if (out.grad_weight.defined()) {
        out.grad_weight.addmm_(grad_logits.t(), rows);
      } else {
        out.grad_weight = grad_logits.t().mm(rows);
      }
    } else if (plan.cuda_kernel) {
      add_product_widening(out.grad_weight, grad_logits.t(), rows);
    } else {
      out.grad_weight.add_(grad_logits.t().mm(rows));  // add_ widens bf16 to fp32 as it adds
    }
  }
  return out;
}

// The head + mean cross-entropy as one autograd node. The forward computes the loss and, in the same
// pass over the chunks, the gradients of the mean loss with respect to hidden and weight; it saves
// those two (N x C and V x C, small) and never the logits. The loss is a scalar, so the backward only
// scales them by the incoming gradient. Computing the gradients here rather than recomputing each
// chunk's logits in the backward saves one of the head's four matmuls and one exp pass over the
// logits (measured on CPU: see docs/benchmarks-log.md, "Fused LM loss").
class ChunkedLmLossFunction : public torch::autograd::Function<ChunkedLmLossFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& targets, const ChunkPlan& plan) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    ChunkedHeadResult result =
        run_chunked_head(hidden, weight, targets, plan, hidden.requires_grad(), weight.requires_grad());
    ctx->save_for_backward({result.grad_hidden, result.grad_weight});
    ctx->saved_data["sum_gradients"] = plan.sum_gradients;
    ctx->saved_data["rows"] = hidden.size(0);
    return result.row_losses.mean();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto saved = ctx->get_saved_variables();
    // A 0-dim tensor: scaling by it needs no device sync. Out of place, so a retained graph can run
    // its backward again.
    // Gradients of the sum: the mean's 1/N joins the incoming gradient (with fp16's loss scale in it),
    // applied in fp32 so that nothing small is flushed.
    const bool sum_gradients = ctx->saved_data["sum_gradients"].toBool();
    auto scale = grad_outputs[0];
    if (sum_gradients) {
      scale = scale.to(torch::kFloat) / static_cast<double>(std::max<int64_t>(ctx->saved_data["rows"].toInt(), 1));
    }
    auto scaled = [&](const torch::Tensor& grad) -> torch::Tensor {
      if (!grad.defined()) return {};
      if (sum_gradients) return (grad.to(torch::kFloat) * scale).to(grad.scalar_type());
      return grad * scale.to(grad.scalar_type());
    };
    return {scaled(saved[0]), scaled(saved[1]), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int64_t lm_loss_chunk_rows(int64_t vocab_size, int64_t n_embd, c10::DeviceType device) {
  // On a CPU, 64 MiB of fp32 logits per chunk: for GPT-2's 50304 tokens that is 333 rows, so the
  // transient memory of the loss is ~130 MB (one chunk's fp32 logits, which become its softmax and
  // gradient in place, plus their bf16 copies under autocast) instead of GBs, and each pass over a
  // chunk stays near the caches. A GPU gains from fewer, larger matmuls and launches: 1 GiB there
  // (5336 rows of GPT-2, ~3 GB of transients at most, against 13 GB of whole fp32 logits at B=32).
  const int64_t chunk_logits_bytes = device == c10::DeviceType::CUDA ? (int64_t{1} << 30) : (int64_t{64} << 20);
  const int64_t rows_by_memory = std::max<int64_t>(1, chunk_logits_bytes / (std::max<int64_t>(vocab_size, 1) * 4));
  // Every chunk that computes gradients reads and writes the whole V x C weight gradient. With at least C
  // rows per chunk that traffic stays below the chunk's own (rows x V) logits traffic, so wide
  // models (C = 768 and up) take somewhat larger chunks rather than become bound by that sum.
  return std::max(rows_by_memory, n_embd);
}

torch::Tensor chunked_lm_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                              const LmLossOptions& options, double logit_softcap) {
  check_inputs(hidden, weight, targets);
  const bool gradient_wanted = torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  if (!gradient_wanted) return chunked_lm_token_losses(hidden, weight, targets, options, logit_softcap).mean();
  return ChunkedLmLossFunction::apply(hidden, weight, targets, plan_chunks(options, hidden, weight, logit_softcap));
}

torch::Tensor chunked_lm_token_losses(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, const LmLossOptions& options,
                                      double logit_softcap) {
  check_inputs(hidden, weight, targets);
  const ChunkPlan plan = plan_chunks(options, hidden, weight, logit_softcap);
  torch::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return run_chunked_head(hidden, weight, targets, plan, false, false).row_losses;
}

}  // namespace mygpt
