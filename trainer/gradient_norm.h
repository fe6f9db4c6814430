#pragma once
// The global gradient norm in one row-wise norm kernel per gradient bucket (not one or two small
// kernels per parameter), computed the same way whether a rank holds the whole gradients or only its
// shard of them (--zero 1), and whatever the bucket sizes.
//
// Every parameter's gradient starts at a multiple of kShardAlignment inside its bucket (and the padding
// is zero), so a bucket read as rows of kShardAlignment elements holds each parameter's pieces, its last
// short piece padded with zeros. The norm of each row, then the norm of all row norms in bucket order
// (the parameters in reverse order, each piece in order), is the result. A shard boundary is a row
// boundary and rows are reduced one by one, so sharded and unsharded runs add the same numbers in the
// same order: bit-identical norms, hence bit-identical clipping.
#include <torch/torch.h>

#include <vector>

#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"

namespace mygpt {

class GradientNorm {
 public:
  // grads must outlive this. sharded: grads reduce-scatter (--zero 1 and 2), so only this rank's shard of
  // each bucket holds averaged gradients; every rank contributes its rows' norms to one small all-reduce.
  GradientNorm(const GradientSynchronizer& grads, Communicator& comm, bool sharded);
  // Of the gradients in the buckets now (on their device; the host does not wait).
  torch::Tensor compute() const;
  int64_t pieces() const { return pieces_; }

 private:
  struct Rows {
    size_t bucket;
    int64_t first, count;  // of the rows of this rank's shard of the bucket that it reads
    int64_t position;      // of the first one's norm in the list of all norms
  };
  const GradientSynchronizer& grads_;
  Communicator& comm_;
  bool sharded_;
  std::vector<Rows> rows_;
  int64_t pieces_ = 0;
};

}  // namespace mygpt
