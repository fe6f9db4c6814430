#include "trainer/fully_sharded_model.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <stdexcept>

namespace mygpt {
namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// The model's unit of a parameter, by its name (model/gpt.h UnitHooks).
int64_t model_unit_of(const std::string& name, int64_t n_layer) {
  auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (starts("wte.") || starts("wpe.") || starts("ln_e.")) return 0;
  if (starts("ln_f.")) return n_layer + 1;
  if (starts("lm_head.")) return n_layer + 2;
  if (starts("h.")) return std::stoll(name.substr(2, name.find('.', 2) - 2)) + 1;
  throw std::logic_error("--zero 3: no unit for the parameter " + name);
}

// Gives the tensor's storage `bytes` of fresh memory, or none: the memory of a unit's whole parameters
// exists only while they are gathered. Views of it (the parameters, and what autograd saved of them)
// keep their storage object and see the memory it holds at the time.
void set_storage_bytes(const torch::Tensor& tensor, size_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == bytes) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

}  // namespace

FullyShardedModel::FullyShardedModel(Gpt model, Communicator& comm, std::optional<torch::Device> on)
    : model_(std::move(model)), comm_(comm) {
  torch::NoGradGuard no_grad;
  const torch::Device device = on.value_or(model_->parameters().front().device());
  std::vector<std::pair<size_t, torch::Tensor>> whole_params;  // those built with memory: copied in below
  const int64_t n_layer = model_->config().n_layer;
  model_units_ = n_layer + 3;
  std::vector<std::vector<size_t>> members(static_cast<size_t>(model_units_));
  for (const auto& item : model_->named_parameters()) {
    members[static_cast<size_t>(model_unit_of(item.key(), n_layer))].push_back(params_.size());
    params_.push_back(item.value());
    names_.push_back(item.key());
  }
  unit_of_param_.resize(params_.size());
  index_in_unit_.resize(params_.size());
  const int64_t world = comm_.world_size();
  for (int64_t mu = 0; mu < model_units_; ++mu) {
    const std::vector<size_t>& in = members[static_cast<size_t>(mu)];
    if (in.empty()) {
      // A tied head reads the token embedding: the embeddings' unit.
      const bool tied_head = mu == model_->head_unit() && model_->config().tie_head;
      unit_of_model_unit_.push_back(tied_head ? unit_of_model_unit_.front() : -1);
      continue;
    }
    Unit unit;
    for (size_t k : in) {
      unit.layout.numel = round_up(unit.layout.numel, kShardAlignment);
      unit.layout.offsets.push_back(unit.layout.numel);
      unit.layout.params.push_back(k);
      unit_of_param_[k] = units_.size();
      index_in_unit_[k] = unit.layout.params.size() - 1;
      unit.layout.numel += params_[k].numel();
    }
    unit.layout.used = unit.layout.numel;
    unit.layout.numel = round_up(unit.layout.numel, kShardAlignment * world);
    // Memory that nothing writes (on a CPU not even paged in) and that release() lets go of below: views
    // are made over a storage of the unit's size, and keep that storage object.
    unit.full = torch::empty({unit.layout.numel}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    for (size_t i = 0; i < in.size(); ++i) {
      torch::Tensor& p = params_[in[i]];
      if (p.storage().nbytes() >= p.nbytes()) whole_params.emplace_back(in[i], p.detach());
      p.set_data(unit.full.slice(0, unit.layout.offsets[i], unit.layout.offsets[i] + p.numel()).view_as(p));
    }
    unit.shard = torch::zeros({unit.layout.numel / world}, unit.full.options());
    unit.grad_shard = torch::zeros_like(unit.shard);
    unit_of_model_unit_.push_back(static_cast<int64_t>(units_.size()));
    units_.push_back(std::move(unit));
  }
  for (size_t u = 0; u < units_.size(); ++u) release(u);
  pieces_of_params_ = shard_pieces();
  for (const auto& [k, whole] : whole_params) set_parameter(names_[k], whole);

  // The gradient norm's pieces (GradientNorm's order: parameters from the last, each in rows of
  // kShardAlignment elements).
  std::vector<int64_t> first_piece(params_.size());
  for (size_t k = params_.size(); k-- > 0;) {
    first_piece[k] = pieces_;
    pieces_ += (params_[k].numel() + kShardAlignment - 1) / kShardAlignment;
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    const BucketLayout& layout = units_[u].layout;
    const int64_t chunk_rows = layout.numel / world / kShardAlignment;
    const int64_t lo = chunk_rows * comm_.rank(), hi = lo + chunk_rows;
    for (size_t i = 0; i < layout.params.size(); ++i) {
      const int64_t start = layout.offsets[i] / kShardAlignment;
      const int64_t rows = (params_[layout.params[i]].numel() + kShardAlignment - 1) / kShardAlignment;
      const int64_t begin = std::max(lo, start), end = std::min(hi, start + rows);
      if (begin < end) norm_rows_.push_back({u, begin - lo, end - begin, first_piece[layout.params[i]] + begin - start});
    }
  }

  for (size_t k = 0; k < params_.size(); ++k) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[k]);
    const uintptr_t key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          take_gradient(k);
          return outputs;
        }));
    hooks_.emplace_back(std::move(accumulator), key);
  }
  model_->set_unit_hooks({[this](int64_t unit) { before_forward(unit); },
                          [this](int64_t unit, const std::vector<torch::Tensor>& outputs) {
                            after_forward(unit, outputs);
                          }});
}

FullyShardedModel::~FullyShardedModel() {
  model_->set_unit_hooks({});
  for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
}

std::vector<ShardedRun> FullyShardedModel::runs() const {
  std::vector<ShardedRun> runs;
  for (const Unit& unit : units_) runs.push_back({unit.layout, unit.shard, unit.grad_shard});
  return runs;
}

int64_t FullyShardedModel::unit_of(int64_t model_unit) const {
  return unit_of_model_unit_.at(static_cast<size_t>(model_unit));
}

void FullyShardedModel::prefetch(size_t index) {
  Unit& unit = units_[index];
  if (unit.gathered || unit.gathering) return;
  torch::NoGradGuard no_grad;
  set_storage_bytes(unit.full, static_cast<size_t>(unit.full.numel()) * unit.full.element_size());
  comm_.chunk_of(unit.full).copy_(unit.shard);
  unit.gathering = comm_.all_gather_async(unit.full);
}

void FullyShardedModel::gather(size_t index) {
  Unit& unit = units_[index];
  if (unit.gathered) return;
  prefetch(index);
  unit.gathering->wait();
  unit.gathering.reset();
  unit.gathered = true;
}

void FullyShardedModel::release(size_t index) {
  Unit& unit = units_[index];
  if (unit.gathering) {  // its memory is being written: wait before letting it go
    unit.gathering->wait();
    unit.gathering.reset();
  }
  set_storage_bytes(unit.full, 0);
  unit.gathered = false;
}

void FullyShardedModel::release_all() {
  for (size_t u = 0; u < units_.size(); ++u) release(u);
}

void FullyShardedModel::before_forward(int64_t model_unit) {
  const int64_t unit = unit_of(model_unit);
  if (unit >= 0) gather(static_cast<size_t>(unit));
  // The next unit's gather goes on while this one computes.
  for (int64_t next = model_unit + 1; next < model_units_; ++next) {
    const int64_t other = unit_of(next);
    if (other >= 0 && other != unit) {
      prefetch(static_cast<size_t>(other));
      break;
    }
  }
}

void FullyShardedModel::after_forward(int64_t model_unit, const std::vector<torch::Tensor>& outputs) {
  const int64_t unit = unit_of(model_unit);
  if (unit < 0) return;
  bool backward_follows = false;
  if (torch::GradMode::is_enabled()) {
    for (const torch::Tensor& out : outputs) {
      if (!out.defined() || !out.requires_grad()) continue;
      // Runs when the gradient of this output is computed, just before the unit's backward.
      out.register_hook([this, model_unit](const torch::Tensor&) { before_backward(model_unit); });
      backward_follows = true;
    }
  }
  // The last unit of a forward that backward follows is the first one backward needs: it stays.
  if (!(backward_follows && model_unit == model_units_ - 1)) release(static_cast<size_t>(unit));
}

void FullyShardedModel::before_backward(int64_t model_unit) {
  const int64_t unit = unit_of(model_unit);
  gather(static_cast<size_t>(unit));
  for (int64_t previous = model_unit - 1; previous >= 0; --previous) {
    const int64_t other = unit_of(previous);
    if (other >= 0 && other != unit) {
      prefetch(static_cast<size_t>(other));
      break;
    }
  }
}

// A gradient that backward finished goes into its unit's buffer and leaves the parameter. Every parameter
// of a unit has its gradient only once every node that read the unit's parameters has run: the unit's
// backward is over, its gradients are reduce-scattered and its parameters released.
void FullyShardedModel::take_gradient(size_t param) {
  torch::NoGradGuard no_grad;
  const size_t index = unit_of_param_[param];
  Unit& unit = units_[index];
  torch::Tensor& p = params_[param];
  if (!unit.grad_buffer.defined()) unit.grad_buffer = torch::zeros({unit.layout.numel}, unit.grad_shard.options());
  const int64_t offset = unit.layout.offsets[index_in_unit_[param]];
  unit.grad_buffer.slice(0, offset, offset + p.numel()).view_as(p).copy_(p.grad());
  p.mutable_grad() = torch::Tensor();
  if (++unit.grads_in == unit.layout.params.size()) {
    reduce(index);
    release(index);
  }
}

void FullyShardedModel::reduce(size_t index) {
  Unit& unit = units_[index];
  if (!unit.grad_buffer.defined()) unit.grad_buffer = torch::zeros({unit.layout.numel}, unit.grad_shard.options());
  unit.reducing = comm_.reduce_scatter_async(unit.grad_buffer, ReduceOp::Average);
  reducing_order_.push_back(index);
  // At most two units' gradients in flight: the older ones are added into their shards and let go.
  while (reducing_order_.size() > 2) {
    fold(reducing_order_.front());
    reducing_order_.erase(reducing_order_.begin());
  }
}

void FullyShardedModel::fold(size_t index) {
  torch::NoGradGuard no_grad;
  Unit& unit = units_[index];
  unit.reducing->wait();
  unit.reducing.reset();
  const torch::Tensor mine = comm_.chunk_of(unit.grad_buffer);
  if (fresh_) {
    unit.grad_shard.copy_(mine);
  } else {
    unit.grad_shard.add_(mine);
  }
  unit.grad_buffer = torch::Tensor();
}

void FullyShardedModel::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  fresh_ = true;
}

void FullyShardedModel::begin_micro_step() {
  if (micro_step_open_) finish();
  micro_step_open_ = true;
}

void FullyShardedModel::finish() {
  if (!micro_step_open_) return;
  // Units that backward did not complete (a parameter without a gradient) are reduced now, in unit order:
  // the same ones on every rank, since every rank ran the same graph.
  for (size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    if (unit.grads_in < unit.layout.params.size()) reduce(u);
  }
  for (size_t u : reducing_order_) fold(u);
  reducing_order_.clear();
  for (Unit& unit : units_) unit.grads_in = 0;
  release_all();
  fresh_ = false;
  micro_step_open_ = false;
}

torch::Tensor FullyShardedModel::gradient_norm() const {
  torch::NoGradGuard no_grad;
  // The other ranks' pieces stay zero here, so the all-reduce's sum is exact.
  auto norms = torch::zeros({pieces_}, units_.front().grad_shard.options());
  for (const NormRows& r : norm_rows_) {
    const torch::Tensor rows = units_[r.unit]
                                   .grad_shard.slice(0, r.first_row * kShardAlignment, (r.first_row + r.count) * kShardAlignment)
                                   .view({r.count, kShardAlignment});
    auto out = norms.slice(0, r.position, r.position + r.count);
    torch::linalg_vector_norm_out(out, rows, 2, /*dim=*/1);
  }
  comm_.all_reduce(norms, ReduceOp::Sum);
  return torch::linalg_vector_norm(norms, 2);
}

bool FullyShardedModel::parameters_finite() {
  torch::NoGradGuard no_grad;
  bool finite = true;
  for (const Unit& unit : units_) finite = finite && torch::isfinite(unit.shard).all().item<bool>();
  auto any_bad = torch::full({1}, finite ? 0.0f : 1.0f, units_.front().shard.options());
  comm_.all_reduce(any_bad, ReduceOp::Max);
  return any_bad.item<float>() == 0.0f;
}

void FullyShardedModel::idle_forward() {
  torch::NoGradGuard no_grad;
  for (int64_t model_unit = 0; model_unit < model_units_; ++model_unit) {
    before_forward(model_unit);
    after_forward(model_unit, {});
  }
}

void FullyShardedModel::for_each_whole_parameter(
    const std::function<void(const std::string&, const torch::Tensor&)>& fn) {
  torch::NoGradGuard no_grad;
  for (size_t u = 0; u < units_.size(); ++u) {
    gather(u);
    for (size_t k : units_[u].layout.params) fn(names_[k], params_[k]);
    release(u);
  }
}

void FullyShardedModel::set_parameter(const std::string& name, const torch::Tensor& whole) {
  torch::NoGradGuard no_grad;
  const auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) throw std::logic_error("--zero 3: the model has no parameter " + name);
  const ShardedTensor& slice = pieces_of_params_[static_cast<size_t>(it - names_.begin())];
  if (!whole.sizes().equals(slice.shape)) throw std::logic_error("--zero 3: " + name + " given in another shape");
  slice.piece.copy_(whole.reshape({-1}).slice(0, slice.offset, slice.offset + slice.piece.numel()));
}

void FullyShardedModel::load_whole_parameters(const std::function<const torch::Tensor&(const std::string&)>& whole) {
  torch::NoGradGuard no_grad;
  for (const ShardedTensor& slice : shard_pieces()) {
    slice.piece.copy_(whole(slice.name).reshape({-1}).slice(0, slice.offset, slice.offset + slice.piece.numel()));
  }
}

std::vector<ShardedTensor> FullyShardedModel::shard_pieces() const {
  // A parameter lies in one unit, whose chunk on this rank is one range: one piece of it here, or none.
  std::vector<ShardedTensor> pieces;
  for (size_t k = 0; k < params_.size(); ++k) {
    pieces.push_back({names_[k], params_[k].sizes().vec(), params_[k].scalar_type(), 0,
                      torch::empty({0}, units_.front().shard.options())});
  }
  for (const Unit& unit : units_) {
    const int64_t chunk = unit.layout.numel / comm_.world_size();
    const int64_t lo = chunk * comm_.rank(), hi = lo + chunk;
    for (size_t i = 0; i < unit.layout.params.size(); ++i) {
      const size_t k = unit.layout.params[i];
      const int64_t begin = std::max(lo, unit.layout.offsets[i]);
      const int64_t end = std::min(hi, unit.layout.offsets[i] + params_[k].numel());
      if (begin >= end) continue;
      pieces[k].offset = begin - unit.layout.offsets[i];
      pieces[k].piece = unit.shard.slice(0, begin - lo, end - lo);
    }
  }
  return pieces;
}

StateDict FullyShardedModelState::state_dict() const {
  // The buffers, which every rank holds whole; the parameters are sharded_state().
  StateDict state;
  for (const auto& item : model_->named_buffers()) state[item.key()] = item.value();
  return state;
}

std::vector<ShardedTensor> FullyShardedModelState::sharded_state() const { return sharded_.shard_pieces(); }

void FullyShardedModelState::load_state_dict(const StateDict& state) {
  size_t used = 0;
  auto entry = [&](const std::string& name, const torch::Tensor& like) -> const torch::Tensor& {
    const auto it = state.find(name);
    if (it == state.end()) throw std::invalid_argument("model state lacks '" + name + "'");
    if (!it->second.sizes().equals(like.sizes()) || it->second.scalar_type() != like.scalar_type()) {
      throw std::invalid_argument("model tensor '" + name + "' has the wrong shape or type");
    }
    return it->second;
  };
  torch::NoGradGuard no_grad;
  for (const auto& item : model_->named_parameters()) {
    entry(item.key(), item.value());
    ++used;
  }
  for (auto& item : model_->named_buffers()) {
    item.value().copy_(entry(item.key(), item.value()));
    ++used;
  }
  if (used != state.size()) throw std::invalid_argument("model state holds tensors this model does not have");
  sharded_.load_whole_parameters([&](const std::string& name) -> const torch::Tensor& { return state.at(name); });
}

}  // namespace mygpt
