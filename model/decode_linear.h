#pragma once
// The matrix-vector products of a decoding step on the CPU: one new position per sequence multiplies
// every weight matrix of the model once, so a step costs reading the weights (500 MB for GPT-2 124M in
// fp32) and the speed is the memory bandwidth one core reaches. Reading 16 consecutive rows of the
// row-major (out, in) weight together (x held in L1) streams as fast as the BLAS's one-row GEMM on a
// column-major copy, 1.4x faster than that GEMM on the row-major weight the model keeps, and needs no
// copy (measured on the 2-core AMD EPYC VM, torch 2.11's MKL; docs/benchmarks-log.md, the generate table).
#include <torch/torch.h>

namespace mygpt {

// At most this many rows of x go through decode_linear: each row adds accumulators, and beyond a few
// rows a GEMM that reuses each weight element across rows (the BLAS) is the faster tool.
inline constexpr int64_t kDecodeLinearMaxRows = 4;

// Whether decode_linear computes linear(x, weight, bias): x (..., in) float32 on the CPU with at most
// kDecodeLinearMaxRows rows, weight (out, in) float32 row-major contiguous on the CPU, bias absent or
// (out) float32, and no gradient to record (decode_linear is not differentiable).
bool decode_linear_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// y = x weight^T + bias, as torch::linear, for inputs decode_linear_applies to (std::logic_error
// otherwise). Each output sums its products in 16 interleaved partial sums over the input in order,
// added in a fixed tree, then the bias: the same arithmetic on every CPU this runs on, except that a CPU
// with FMA fuses each multiply-add (so results agree with a double-precision reference to fp32's bound,
// not bit for bit across CPU kinds).
torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// linear(x, weight, bias) in a read with a KV cache: decode_linear for the few rows of a decoding step
// (continues_cache: the cache already held positions) where it applies, torch::linear otherwise. A first
// read is always torch::linear, as a read without the cache computes it, so that the two agree bit for bit.
torch::Tensor decoding_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              bool continues_cache);

// linear(x, weight, bias) for a decoding step of several sequences at once (GptImpl::decode_rows), whose
// rows may be any number: where decode_linear applies to one row, groups of kDecodeLinearMaxRows rows go
// through it, so each row's result is bit for bit the one it gets decoded alone (decode_linear sums each
// row in the same order however many rows share the pass) at the cost of reading the weights once per
// group; torch::linear otherwise (a GPU's, whose rows need not match a read of one row).
torch::Tensor row_invariant_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// The instruction sets decode_linear has code for; it uses the widest this CPU runs. Naming one runs
// that code instead (for the tests, which check each against the reference on the CPU they run on).
enum class DecodeLinearIsa { avx512, avx2, baseline };
bool decode_linear_isa_runs_here(DecodeLinearIsa isa);
torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                            DecodeLinearIsa isa);

}  // namespace mygpt
