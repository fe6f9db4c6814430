#pragma once
// The fused softmax cross-entropy kernel of the chunked LM loss, declared without CUDA or LibTorch
// types so that plain C++ (model/lm_loss_cuda.cpp) can call it and nvcc never compiles torch headers.
#include <cstdint>

namespace mygpt::cuda_kernels {

enum class LogitsType { float32, bfloat16, float16 };

// For each of `rows` rows of `logits` (row-major, `vocab` wide, on the device):
//   row_losses[r] = logsumexp(logits[r]) - logits[r][targets[r]]                     (fp32)
// and, when write_grad, replaces logits[r] in place by (softmax(logits[r]) - onehot(targets[r])) * grad_scale,
// in the logits' own type. The softmax is accumulated in fp32 whatever the logits' type, with one read of
// the row for its max and sum (online softmax) and one read-write for the gradient. A target outside
// [0, vocab) gives a NaN loss (the trainer then skips the step) and no onehot term.
// Returns the cudaError_t of the launch (0 for success). `stream` is a cudaStream_t.
int launch_lm_loss_rows(void* logits, LogitsType type, const int64_t* targets, float* row_losses, int64_t rows,
                        int64_t vocab, float grad_scale, bool write_grad, void* stream);

}  // namespace mygpt::cuda_kernels
