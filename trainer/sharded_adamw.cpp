#include "trainer/sharded_adamw.h"

#include <algorithm>
#include <stdexcept>

namespace mygpt {
namespace {

// AdamW's names of a parameter's state: "<group>.<index in group>".
std::string state_key(int group, size_t index) { return std::to_string(group) + "." + std::to_string(index); }

// The group of a parameter in neither of AdamW's: another optimizer updates it (Muon's matrices).
constexpr int kOtherOptimizer = -1;

std::vector<std::pair<int, size_t>> groups_of(const std::vector<torch::Tensor>& params,
                                              const std::vector<torch::Tensor>& decay,
                                              const std::vector<torch::Tensor>& no_decay) {
  std::vector<std::pair<int, size_t>> out;
  for (const auto& p : params) {
    auto find = [&](const std::vector<torch::Tensor>& group) {
      return std::find_if(group.begin(), group.end(), [&](const torch::Tensor& t) { return t.is_same(p); });
    };
    if (auto it = find(decay); it != decay.end()) {
      out.emplace_back(0, static_cast<size_t>(it - decay.begin()));
    } else if (auto it2 = find(no_decay); it2 != no_decay.end()) {
      out.emplace_back(1, static_cast<size_t>(it2 - no_decay.begin()));
    } else {
      out.emplace_back(kOtherOptimizer, 0);  // Muon's matrix: its gradient pieces only
    }
  }
  return out;
}

// Moves every parameter into its bucket's flat buffer (the parameter becomes a view of it), so an
// all-gather of the buffer updates the parameters in place.
std::vector<torch::Tensor> move_into_buckets(const std::vector<torch::Tensor>& params,
                                             const std::vector<BucketLayout>& layout) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flats;
  for (const BucketLayout& bucket : layout) {
    auto flat = torch::zeros({bucket.numel}, params[bucket.params.front()].options().requires_grad(false));
    for (size_t i = 0; i < bucket.params.size(); ++i) {
      torch::Tensor p = params[bucket.params[i]];
      auto view = flat.slice(0, bucket.offsets[i], bucket.offsets[i] + p.numel()).view_as(p);
      view.copy_(p);
      p.set_data(view);
    }
    flats.push_back(flat);
  }
  return flats;
}

}  // namespace

// The runs of --zero 1 and 2: the buckets, with this rank's chunk of the flat parameters and gradients.
static std::vector<ShardedRun> bucket_runs(const GradientSynchronizer& grads, const std::vector<torch::Tensor>& flat_params,
                                           Communicator& comm) {
  if (grads.sharding() == GradientSharding::none) throw std::logic_error("ShardedAdamW needs sharded gradients");
  std::vector<ShardedRun> runs;
  for (size_t b = 0; b < grads.layout().size(); ++b) {
    runs.push_back({grads.layout()[b], comm.chunk_of(flat_params[b]), grads.shard_gradients(b)});
  }
  return runs;
}

ShardedAdamW::ShardedAdamW(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& decay_params,
                           const std::vector<torch::Tensor>& no_decay_params, const GradientSynchronizer& grads,
                           const AdamWOptions& options, Communicator& comm)
    : params_(params),
      group_of_param_(groups_of(params, decay_params, no_decay_params)),
      flat_params_(move_into_buckets(params_, grads.layout())),
      runs_(bucket_runs(grads, flat_params_, comm)),
      comm_(comm),
      adamw_(make_adamw(options)) {}

ShardedAdamW::ShardedAdamW(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& decay_params,
                           const std::vector<torch::Tensor>& no_decay_params, std::vector<ShardedRun> runs,
                           const AdamWOptions& options, Communicator& comm)
    : params_(params),
      group_of_param_(groups_of(params, decay_params, no_decay_params)),
      runs_(std::move(runs)),
      comm_(comm),
      adamw_(make_adamw(options)) {}

AdamW ShardedAdamW::make_adamw(const AdamWOptions& options) {
  if (runs_.empty()) throw std::logic_error("ShardedAdamW without parameters");
  // This rank's pieces: where its chunk of each run meets each parameter.
  std::vector<torch::Tensor> views[2];
  for (size_t b = 0; b < runs_.size(); ++b) {
    const BucketLayout& bucket = runs_[b].layout;
    const int64_t chunk = bucket.numel / comm_.world_size();
    const int64_t lo = chunk * comm_.rank(), hi = lo + chunk;
    for (size_t i = 0; i < bucket.params.size(); ++i) {
      const size_t k = bucket.params[i];
      const int64_t begin = std::max(lo, bucket.offsets[i]);
      const int64_t end = std::min(hi, bucket.offsets[i] + params_[k].numel());
      if (begin >= end) continue;
      const auto [group, in_group] = group_of_param_[k];
      const int64_t param_offset = begin - bucket.offsets[i];
      if (group == kOtherOptimizer) {
        foreign_pieces_.push_back({k, group, 0, 0, b, begin, param_offset, end - begin,
                                   runs_[b].grads.slice(0, begin - lo, end - lo)});
        continue;
      }
      pieces_.push_back({k, group, views[group].size(), in_group, b, begin, param_offset, end - begin,
                         runs_[b].grads.slice(0, begin - lo, end - lo)});
      torch::Tensor view = runs_[b].params.slice(0, begin - lo, end - lo);
      view.mutable_grad() = pieces_.back().grad;
      views[group].push_back(view);
    }
  }
  return AdamW(views[0], views[1], options);
}

std::vector<torch::Tensor> ShardedAdamW::shard_gradients() const {
  std::vector<torch::Tensor> out;
  for (const Piece& piece : pieces_) out.push_back(piece.grad);
  for (const Piece& piece : foreign_pieces_) out.push_back(piece.grad);
  return out;
}

ShardedTensor ShardedAdamW::gradient_piece(const torch::Tensor& param) const { return piece_of(param, true); }

ShardedTensor ShardedAdamW::parameter_piece(const torch::Tensor& param) const { return piece_of(param, false); }

ShardedTensor ShardedAdamW::piece_of(const torch::Tensor& param, bool gradient) const {
  const auto k = static_cast<size_t>(
      std::find_if(params_.begin(), params_.end(), [&](const torch::Tensor& p) { return p.is_same(param); }) -
      params_.begin());
  if (k == params_.size()) throw std::logic_error("a piece of a tensor that is not a parameter of this optimizer");
  ShardedTensor t{gradient ? "grad" : "param", param.sizes().vec(), param.scalar_type(), 0,
                  torch::empty({0}, runs_.front().params.options())};
  for (const auto* pieces : {&pieces_, &foreign_pieces_}) {
    for (const Piece& piece : *pieces) {
      if (piece.param != k) continue;
      const int64_t lo = runs_[piece.bucket].params.numel() * comm_.rank();  // the run's chunk on this rank
      t.offset = piece.param_offset;
      t.piece = gradient ? piece.grad
                         : runs_[piece.bucket].params.slice(0, piece.bucket_offset - lo, piece.bucket_offset - lo + piece.numel);
    }
  }
  return t;
}

void ShardedAdamW::gather_parameters() {
  torch::NoGradGuard no_grad;
  std::vector<std::unique_ptr<PendingCollective>> pending;
  for (auto& flat : flat_params_) pending.push_back(comm_.all_gather_async(flat));
  for (auto& p : pending) p->wait();
}

StateDict ShardedAdamW::state_dict() const {
  // A collective (the step counts). The moments are sharded_state(): a checkpoint gathers them tensor by
  // tensor, so no rank ever holds the whole state.
  torch::NoGradGuard no_grad;
  const StateDict mine = adamw_.state_dict();
  StateDict whole;
  whole["steps_taken"] = mine.at("steps_taken");
  // Step counts: every parameter's from a rank holding a piece of it (all of its pieces agree).
  auto steps = torch::zeros({static_cast<int64_t>(params_.size())}, runs_[0].params.options());
  for (const Piece& piece : pieces_) {
    steps[static_cast<int64_t>(piece.param)].copy_(mine.at("step." + state_key(piece.group, piece.index)));
  }
  comm_.all_reduce(steps, ReduceOp::Max);
  steps = steps.to(torch::kCPU);
  for (size_t k = 0; k < params_.size(); ++k) {
    if (group_of_param_[k].first == kOtherOptimizer) continue;
    whole["step." + state_key(group_of_param_[k].first, group_of_param_[k].second)] =
        steps[static_cast<int64_t>(k)].clone();
  }
  return whole;
}

std::vector<ShardedTensor> ShardedAdamW::sharded_state() const {
  // Each parameter lies in one bucket, whose chunk on this rank is one range: at most one piece of it here.
  const StateDict mine = adamw_.state_dict();
  std::vector<const Piece*> piece_of(params_.size(), nullptr);
  for (const Piece& piece : pieces_) piece_of[piece.param] = &piece;
  std::vector<ShardedTensor> sharded;
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    for (size_t k = 0; k < params_.size(); ++k) {
      const torch::Tensor& p = params_[k];
      const auto [group, in_group] = group_of_param_[k];
      if (group == kOtherOptimizer) continue;
      ShardedTensor t{std::string(name) + "." + state_key(group, in_group), p.sizes().vec(), p.scalar_type(), 0,
                      torch::empty({0}, p.options())};
      if (const Piece* piece = piece_of[k]) {
        t.offset = piece->param_offset;
        t.piece = mine.at(std::string(name) + "." + state_key(piece->group, piece->index)).reshape({-1});
      }
      sharded.push_back(std::move(t));
    }
  }
  return sharded;
}

void ShardedAdamW::load_state_dict(const StateDict& state) {
  const auto key = state_key;
  auto saved = [&](const std::string& name) -> const torch::Tensor& {
    const auto it = state.find(name);
    if (it == state.end()) throw std::invalid_argument("optimizer state lacks '" + name + "'");
    return it->second;
  };
  // This rank's pieces of the full state, under the names of its own AdamW (which checks types and shapes).
  StateDict mine;
  mine["steps_taken"] = saved("steps_taken");
  for (const Piece& piece : pieces_) {
    const torch::Tensor& p = params_[piece.param];
    const std::string full_key = key(piece.group, piece.in_group), own_key = key(piece.group, piece.index);
    for (const char* name : {"exp_avg", "exp_avg_sq"}) {
      const torch::Tensor& from = saved(std::string(name) + "." + full_key);
      if (!from.sizes().equals(p.sizes())) {
        throw std::invalid_argument("optimizer state " + std::string(name) + "." + full_key +
                                    " does not match the model's shapes");
      }
      mine[std::string(name) + "." + own_key] =
          from.reshape({-1}).slice(0, piece.param_offset, piece.param_offset + piece.numel);
    }
    mine["step." + own_key] = saved("step." + full_key);
  }
  adamw_.load_state_dict(mine);
}

}  // namespace mygpt
