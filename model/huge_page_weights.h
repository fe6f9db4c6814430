#pragma once
// A decoding step reads every weight of the model once (model/decode_linear.h): hundreds of MB in 4 KiB
// pages cost a TLB miss every few rows, and in a virtual machine each miss walks two page tables. The
// same reads from 2 MiB pages ran 1.2-1.9x faster on the 2-core AMD EPYC VM this project is measured on
// (docs/benchmarks-log.md, the generate table). Transparent huge pages are only given where asked for on
// most Linux systems (/sys/kernel/mm/transparent_hugepage/enabled = madvise), and LibTorch's CPU
// allocator asks only when THP_MEM_ALLOC_ENABLE is set at start-up, for the whole process: this asks
// for the weights of a model that only infers, nothing else.
#include <torch/torch.h>

#include <string>

namespace mygpt {

// Copies every parameter and buffer of `module` (CPU tensors) into one anonymous mapping advised for
// huge pages and points the parameters at the copies (same values, shapes and contiguous layout; each
// old storage is freed as its copy is made, so the peak is the weights plus one tensor). Returns how
// it went, one line for a log: the bytes moved, or why nothing was (not Linux, no CPU tensors, the
// mapping refused). For inference only: an optimizer holding the old tensors would not see the copies.
// Tensors already placed by either function are left where they are (a model loaded straight into
// huge-page memory is not copied again).
std::string move_weights_to_huge_pages(torch::nn::Module& module);

// The same placement without the copy: for a model whose weights are about to be loaded (built with
// WeightInit::for_loading), so that the load writes them once, straight into their final storage. The
// parameters' values afterwards are unspecified.
std::string place_weights_in_huge_pages(torch::nn::Module& module);

}  // namespace mygpt
