#pragma once
// Muon (MomentUm Orthogonalized by Newton-Schulz, Keller Jordan 2024) for the 2-D weight matrices inside
// the transformer blocks: SGD momentum (Nesterov by default), then each matrix's update replaced by an
// approximately orthogonal matrix (the same singular vectors, singular values near 1) from a few
// Newton-Schulz iterations. Embeddings, the (tied) head, biases and gains stay with AdamW.
//
// Distributed without duplicated work: each matrix has an owner rank (dealt by size, largest first, each
// to the rank with the fewest elements so far), which alone orthogonalizes it, the expensive part; the
// updates are then exchanged and every rank applies all. Without sharding the momentum update is
// elementwise and runs on every rank (so the state is the same everywhere). With --zero 1, 2 or 3
// (use_sharded_gradients) each rank holds only its chunk of the averaged gradients: the owner gathers
// its matrix's whole gradient from the ranks' pieces (as DeepSpeed's and torchtitan's Muon gather a
// parameter whole for Newton-Schulz) and alone keeps that matrix's momentum, which a checkpoint gathers
// as sharded state; the scalar parameters stay with the sharded AdamW. At --zero 3, where no rank holds a
// whole matrix, the owner broadcasts each matrix's update in turn and every rank applies it to its piece.
#include <torch/torch.h>

#include <optional>
#include <vector>

#include "distributed/communicator.h"
#include "model/gpt.h"
#include "trainer/sharded_adamw.h"
#include "trainer/stateful.h"

namespace mygpt {

struct MuonOptions {
  double lr = 0;            // in units of the update's spectral norm (about 1 per matrix before scaling)
  double momentum = 0;      // beta of the momentum buffer
  bool nesterov = true;     // orthogonalize grad.lerp(momentum, beta) instead of the momentum itself
  int64_t ns_steps = 0;     // Newton-Schulz iterations
  double weight_decay = 0;  // decoupled, as AdamW's: p *= 1 - lr * weight_decay
};

// One matrix Muon updates. row_blocks > 1 splits its rows into that many matrices orthogonalized
// separately: the fused q, k, v projection is three linear maps, not one.
struct MuonMatrix {
  torch::Tensor param;
  int64_t row_blocks = 1;
  // Row blocks of unequal sizes (grouped-query attention's q, k, v), summing to the rows; overrides
  // row_blocks when given.
  std::vector<int64_t> row_sizes = {};
};

// Which parameters each optimizer of --optimizer muon takes.
struct MuonSplit {
  std::vector<MuonMatrix> muon;                             // the blocks' 2-D weights
  std::vector<torch::Tensor> adamw_decay, adamw_no_decay;  // embeddings (and the tied head); biases and gains
};
MuonSplit split_for_muon(const Gpt& model);

// The quintic Newton-Schulz iteration on a batch of matrices (..., m, n): an approximately orthogonal
// matrix with g's singular vectors. It runs in g's dtype (the caller picks bf16 or fp32) and returns it.
torch::Tensor newton_schulz_orthogonalize(const torch::Tensor& g, int64_t steps);

class Muon final : public StatefulPart {
 public:
  // comm must outlive the optimizer; every rank passes the same matrices in the same order.
  Muon(std::vector<MuonMatrix> matrices, const MuonOptions& options, Communicator& comm);

  void set_lr(double lr) { options_.lr = lr; }
  double lr() const { return options_.lr; }
  // found_inf (float 0/1 on the parameters' device) leaves weights and momentum untouched when 1,
  // decided on the device as AdamW::step does.
  void step(const std::optional<torch::Tensor>& found_inf = std::nullopt);
  std::vector<torch::Tensor> parameters() const;
  // The rank that orthogonalizes matrix i (largest matrices first, each to the least loaded rank).
  int owner_of(size_t i) const { return owner_[i]; }
  // --zero 1, 2, 3: the averaged gradients are sharded (gradients' pieces from `sharded`, which must
  // outlive this; at --zero 3 the parameters' pieces too); each rank then keeps the momentum of its own
  // matrices only.
  void use_sharded_gradients(const ShardedAdamW& sharded);

  // "momentum.<index>", one per matrix, whole whatever the sharding, so it loads on any number of ranks:
  // state_dict() unsharded, sharded_state() with --zero 1, 2, 3 (the owner's piece is the whole matrix).
  StateDict state_dict() const override;
  std::vector<ShardedTensor> sharded_state() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return false; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::load; }

 private:
  std::vector<MuonMatrix> matrices_;
  std::vector<torch::Tensor> momentum_;
  std::vector<int> owner_;
  std::vector<int64_t> offset_;  // of each matrix's update inside the exchanged flat buffer
  int64_t total_numel_ = 0;
  MuonOptions options_;
  Communicator& comm_;
  void apply_to_pieces(const std::vector<torch::Tensor>& own_updates, const std::optional<torch::Tensor>& skip);

  const ShardedAdamW* sharded_ = nullptr;  // --zero 1, 2, 3: where the gradients' pieces are
  bool pieces_only_ = false;               // --zero 3: the parameters are this rank's pieces alone
};

}  // namespace mygpt
