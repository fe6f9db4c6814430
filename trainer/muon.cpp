#include "trainer/muon.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "trainer/sharded_gather.h"

namespace mygpt {
namespace {

// The quintic's coefficients (KellerJordan/Muon): chosen to make the slope at zero as steep as possible
// while the iteration still maps singular values of (0, 1] into about [0.7, 1.2] in five steps. It does
// not converge to exactly 1; that costs nothing in training and saves iterations.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

MuonSplit split_for_muon(const Gpt& model) {
  MuonSplit split;
  std::set<const void*> in_blocks;
  // The fused projections are several matrices, each orthogonalized on its own as nanochat's separate
  // c_q, c_k, c_v (and Llama's gate and up) are: q, k and v (of unequal rows under grouped-query
  // attention), SwiGLU's gate and up.
  const GptConfig& c = model->config();
  const int64_t hs = c.head_size();
  for (const auto& item : model->h->named_parameters()) {
    const torch::Tensor& p = item.value();
    if (p.dim() != 2) continue;
    if (ends_with(item.key(), "attn.c_attn.weight")) {
      if (c.kv_heads() == c.n_head) {
        split.muon.push_back({p, 3});
      } else {
        split.muon.push_back({p, 1, {c.n_head * hs, c.kv_heads() * hs, c.kv_heads() * hs}});
      }
    } else {
      split.muon.push_back({p, c.mlp == MlpKind::swiglu && ends_with(item.key(), "mlp.c_fc.weight") ? 2 : 1});
    }
    in_blocks.insert(p.unsafeGetTensorImpl());
  }
  for (const auto& p : model->parameters()) {
    if (in_blocks.count(p.unsafeGetTensorImpl())) continue;
    (p.dim() >= 2 ? split.adamw_decay : split.adamw_no_decay).push_back(p);
  }
  return split;
}

torch::Tensor newton_schulz_orthogonalize(const torch::Tensor& g, int64_t steps) {
  // Work on the wide orientation (m <= n) so that X X^T is the smaller square.
  const bool tall = g.size(-2) > g.size(-1);
  torch::Tensor x = tall ? g.mT() : g;
  // Frobenius norm >= spectral norm: afterwards every singular value is at most 1, where the iteration
  // converges.
  x = x / (torch::linalg_matrix_norm(x, "fro", {-2, -1}, /*keepdim=*/true) + 1e-7);
  for (int64_t i = 0; i < steps; ++i) {
    // X <- a X + (b A + c A^2) X with A = X X^T: the odd polynomial a s + b s^3 + c s^5 applied to
    // each singular value s, without ever forming the SVD.
    const torch::Tensor a = torch::matmul(x, x.mT());
    const torch::Tensor b = kB * a + kC * torch::matmul(a, a);
    x = kA * x + torch::matmul(b, x);
  }
  return tall ? x.mT() : x;
}

Muon::Muon(std::vector<MuonMatrix> matrices, const MuonOptions& options, Communicator& comm)
    : matrices_(std::move(matrices)), options_(options), comm_(comm) {
  std::vector<size_t> by_size(matrices_.size());
  std::iota(by_size.begin(), by_size.end(), size_t{0});
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return matrices_[a].param.numel() > matrices_[b].param.numel(); });
  // Greedy balance: each matrix, largest first, to the rank with the fewest elements so far (the lowest
  // rank of equals), so the ranks' Newton-Schulz work and momenta are about even.
  owner_.resize(matrices_.size());
  std::vector<int64_t> load(static_cast<size_t>(comm_.world_size()), 0);
  for (const size_t i : by_size) {
    const auto least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner_[i] = static_cast<int>(least);
    load[least] += matrices_[i].param.numel();
  }
  for (const MuonMatrix& m : matrices_) {
    const torch::Tensor& p = m.param;
    const int64_t sized_rows = std::accumulate(m.row_sizes.begin(), m.row_sizes.end(), int64_t{0});
    if (p.dim() != 2 || m.row_blocks < 1 || p.size(0) % m.row_blocks != 0 ||
        (!m.row_sizes.empty() && sized_rows != p.size(0))) {
      throw std::logic_error("Muon takes 2-D matrices whose rows split evenly into its row blocks");
    }
    momentum_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    offset_.push_back(total_numel_);
    total_numel_ += p.numel();
  }
}

void Muon::use_sharded_gradients(const ShardedAdamW& sharded) {
  sharded_ = &sharded;
  pieces_only_ = !sharded.parameters_whole();
  // The momenta of other ranks' matrices are neither kept nor saved here.
  for (size_t i = 0; i < momentum_.size(); ++i) {
    if (owner_[i] != comm_.rank()) momentum_[i] = torch::Tensor();
  }
}

void Muon::step(const std::optional<torch::Tensor>& found_inf) {
  torch::NoGradGuard no_grad;
  if (matrices_.empty()) return;
  const torch::Tensor& first = matrices_.front().param;
  const bool cuda = first.device().is_cuda();
  const int rank = comm_.rank();
  const std::optional<torch::Tensor> skip =
      found_inf ? std::optional<torch::Tensor>(found_inf->to(first.device()).ne(0)) : std::nullopt;
  // Each rank writes the updates it computed into its slices of a zeroed buffer; an all-reduce (a sum
  // with zeros elsewhere, so exact) then hands every rank all of them. An all_gather of per-rank shares
  // would move less data and can replace this once the communicator offers one. --zero 3 holds no buffer
  // of every matrix: each update is broadcast from its owner, one matrix at a time, below.
  torch::Tensor updates;
  if (!pieces_only_) updates = torch::zeros({total_numel_}, first.options().dtype(torch::kFloat));
  std::vector<torch::Tensor> own_updates(pieces_only_ ? matrices_.size() : 0);
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const torch::Tensor& p = matrices_[i].param;
    torch::Tensor grad;
    if (sharded_) {
      // A collective: the owner gets the whole averaged gradient from the ranks' pieces of it.
      grad = gather_sharded_tensor(comm_, sharded_->gradient_piece(p), owner_[i]);
      if (owner_[i] != rank) continue;
    } else {
      grad = p.grad().defined() ? p.grad() : torch::zeros_like(p);
    }
    torch::Tensor new_momentum = momentum_[i].lerp(grad, 1.0 - options_.momentum);
    if (skip) new_momentum = torch::where(*skip, momentum_[i], new_momentum);
    momentum_[i].copy_(new_momentum);
    if (owner_[i] != rank) continue;
    const torch::Tensor direction = options_.nesterov ? grad.lerp(momentum_[i], options_.momentum) : momentum_[i];
    // Equal row blocks go through the iteration as one batch.
    auto orthogonal_update = [&](const torch::Tensor& d, int64_t blocks) {
      const int64_t rows = d.size(0) / blocks, cols = d.size(1);
      // bf16 on CUDA, where its matmuls are fast and the iteration is known to be stable in it; fp32 on
      // the CPU, where bf16 matmuls are slow.
      const torch::Tensor input = d.reshape({blocks, rows, cols}).to(cuda ? torch::kBFloat16 : torch::kFloat);
      torch::Tensor update = newton_schulz_orthogonalize(input, options_.ns_steps).to(torch::kFloat);
      // A semi-orthogonal rows x cols matrix has RMS entries 1/sqrt(max(rows, cols)); the factor
      // (KellerJordan/Muon's) makes every update's RMS 1/sqrt(cols), one over the fan-in, for tall
      // matrices as for wide.
      update = update * std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
      return update.reshape({-1});
    };
    torch::Tensor update;
    if (matrices_[i].row_sizes.empty()) {
      update = orthogonal_update(direction, matrices_[i].row_blocks);
    } else {
      std::vector<torch::Tensor> parts;
      for (const auto& piece : direction.split_with_sizes(matrices_[i].row_sizes, 0)) {
        parts.push_back(orthogonal_update(piece, 1));
      }
      update = torch::cat(parts);
    }
    if (pieces_only_) {
      own_updates[i] = update;
    } else {
      updates.narrow(0, offset_[i], p.numel()).copy_(update);
    }
  }
  if (pieces_only_) {
    apply_to_pieces(own_updates, skip);
    return;
  }
  if (comm_.world_size() > 1) comm_.all_reduce(updates, ReduceOp::Sum);
  for (size_t i = 0; i < matrices_.size(); ++i) {
    torch::Tensor& p = matrices_[i].param;
    const torch::Tensor update = updates.narrow(0, offset_[i], p.numel()).view(p.sizes());
    torch::Tensor next = p * (1.0 - options_.lr * options_.weight_decay) - options_.lr * update;
    if (skip) next = torch::where(*skip, p, next);
    p.copy_(next);
  }
}

void Muon::apply_to_pieces(const std::vector<torch::Tensor>& own_updates, const std::optional<torch::Tensor>& skip) {
  // --zero 3: every rank gets each matrix's update from its owner and applies the same elementwise
  // arithmetic as the whole-matrix path to its own piece of the parameter: the same numbers.
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const torch::Tensor& p = matrices_[i].param;
    const ShardedTensor mine = sharded_->parameter_piece(p);
    torch::Tensor update = owner_[i] == comm_.rank()
                               ? own_updates[i]
                               : torch::empty({p.numel()}, mine.piece.options().dtype(torch::kFloat));
    if (comm_.world_size() > 1) comm_.broadcast(update, owner_[i]);
    if (mine.piece.numel() == 0) continue;
    const torch::Tensor piece_update = update.slice(0, mine.offset, mine.offset + mine.piece.numel());
    torch::Tensor next = mine.piece * (1.0 - options_.lr * options_.weight_decay) - options_.lr * piece_update;
    if (skip) next = torch::where(*skip, mine.piece, next);
    mine.piece.copy_(next);
  }
}

std::vector<torch::Tensor> Muon::parameters() const {
  std::vector<torch::Tensor> out;
  for (const MuonMatrix& m : matrices_) out.push_back(m.param);
  return out;
}

StateDict Muon::state_dict() const {
  StateDict state;
  if (sharded_) return state;  // sharded_state()
  for (size_t i = 0; i < momentum_.size(); ++i) state["momentum." + std::to_string(i)] = momentum_[i];
  return state;
}

std::vector<ShardedTensor> Muon::sharded_state() const {
  std::vector<ShardedTensor> state;
  if (!sharded_) return state;
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const torch::Tensor& p = matrices_[i].param;
    const bool mine = owner_[i] == comm_.rank();
    state.push_back({"momentum." + std::to_string(i), p.sizes().vec(), p.scalar_type(), 0,
                     mine ? momentum_[i].reshape({-1}) : torch::empty({0}, p.options())});
  }
  return state;
}

void Muon::load_state_dict(const StateDict& state) {
  torch::NoGradGuard no_grad;
  if (state.size() != matrices_.size()) {
    throw std::invalid_argument("Muon state holds " + std::to_string(state.size()) + " tensors; this model has " +
                                std::to_string(momentum_.size()) + " matrices");
  }
  for (size_t i = 0; i < momentum_.size(); ++i) {
    const std::string name = "momentum." + std::to_string(i);
    const auto it = state.find(name);
    if (it == state.end()) throw std::invalid_argument("Muon state lacks '" + name + "'");
    const torch::Tensor& p = matrices_[i].param;
    if (!it->second.sizes().equals(p.sizes()) || it->second.scalar_type() != p.scalar_type()) {
      throw std::invalid_argument("Muon state " + name + " does not match the model's shapes");
    }
    if (momentum_[i].defined()) momentum_[i].copy_(it->second);  // sharded: this rank's matrices only
  }
}

}  // namespace mygpt
