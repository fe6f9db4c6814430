#pragma once
// The head's fp32 weight gradient summed from 16-bit products (the CUDA loss kernel's path): ATen's
// widening addmm (bf16 inputs, fp32 accumulator, cuBLAS adding into the fp32 sum) where ATen takes it,
// else a separate 16-bit product added in fp32. The two differ in speed and memory, so a run (and a
// benchmark row) must be able to say which one it measured instead of silently measuring the other.
#include <torch/torch.h>

#include <string>

namespace mygpt {

enum class WideningSumPath {
  not_run,        // no widening sum in this process yet
  in_place,       // at::addmm_out with an fp32 out_dtype: no 16-bit (V x C) temporary
  separate_pass,  // ATen refused it: a 16-bit product, then an fp32 add (one more pass, one more buffer)
};

// sum (fp32) += a @ b (a, b 16-bit). The first refusal by ATen is remembered for the process: later calls
// go straight to the separate pass (a refused call does nothing, but throwing costs time every chunk).
void add_product_widening(torch::Tensor& sum, const torch::Tensor& a, const torch::Tensor& b);

// The path the process's widening sums took (separate_pass once any was refused).
WideningSumPath widening_sum_path();

// One line for the run's log when ATen refused (empty otherwise): which path ran, and ATen's reason.
std::string widening_sum_note();

}  // namespace mygpt
