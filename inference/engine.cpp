#include "inference/engine.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace mygpt {

Sequence::Sequence(const Gpt& model, SequenceSettings settings)
    : settings_(std::move(settings)), cache_(model->make_kv_cache()) {
  if (settings_.seed) generator_ = at::make_generator<at::CPUGeneratorImpl>(*settings_.seed);
  if (settings_.sampling.temperature < 0 || settings_.sampling.top_k < 0 || !(settings_.sampling.top_p > 0) ||
      settings_.sampling.top_p > 1) {
    throw std::invalid_argument("sampling: temperature and top_k must not be negative, top_p must be in (0, 1]");
  }
}

void Sequence::start_reply(std::span<const int64_t> ids) {
  if (ids.empty() && unread() == 0) throw std::invalid_argument("a reply needs ids to read first");
  reply_.clear();
  reason_ = settings_.sampling.max_new_tokens > 0 ? FinishReason::none : FinishReason::length;
  append(ids);
}

void Sequence::append(std::span<const int64_t> ids) { ids_.insert(ids_.end(), ids.begin(), ids.end()); }

void Sequence::cancel() {
  if (!finished()) reason_ = FinishReason::cancelled;
}

void Sequence::reset() {
  cache_.clear();
  ids_.clear();
  read_ = 0;
  reply_.clear();
  reason_ = FinishReason::none;
}

torch::Tensor Engine::read_alone(Sequence& s) {
  const torch::Device device = model_->parameters().front().device();
  const int64_t total = static_cast<int64_t>(s.ids_.size());
  auto ids_from = [&](int64_t first) {
    return torch::tensor(std::vector<int64_t>(s.ids_.begin() + first, s.ids_.end()), torch::kLong)
        .unsqueeze(0)
        .to(device);
  };
  // The window: the last block of the context (all of it until it outgrows the block).
  const int64_t window_start = std::max<int64_t>(0, total - s.cache_.capacity());
  if (!kv_cache_) {
    s.read_ = total;
    return model_->forward(ids_from(window_start), {.last_position_only = true});
  }
  if (s.cache_.length() + s.unread() > s.cache_.capacity()) {
    // The context passed the block: its positions all moved by the slide, so the window is read anew
    // (a first read with the cache is the uncached computation, as generate() does it).
    s.cache_.clear();
    s.read_ = window_start;
  }
  const auto logits = model_->forward(ids_from(s.read_), {.cache = &s.cache_, .last_position_only = true});
  s.read_ = total;
  return logits;
}

void Engine::draw(Sequence& s, const torch::Tensor& row_logits) {
  const auto logits = row_logits.to(torch::kFloat);
  if (!torch::isfinite(logits).all().item<bool>()) {
    s.reason_ = FinishReason::non_finite_logits;
    return;
  }
  const SequenceSettings& settings = s.settings_;
  auto allowed = limit_vocab(logits, settings.sampling.vocab_limit);
  if (settings.banned.defined()) {
    allowed = allowed.masked_fill(settings.banned.to(allowed.device()), -std::numeric_limits<float>::infinity());
  }
  const int64_t next = sample_next(allowed, settings.sampling, s.generator_).item<int64_t>();
  s.reply_.push_back(next);
  s.ids_.push_back(next);
  if (std::find(settings.end_ids.begin(), settings.end_ids.end(), next) != settings.end_ids.end()) {
    s.reason_ = FinishReason::end_id;
  } else if (!settings.slide_past_context && static_cast<int64_t>(s.ids_.size()) > s.cache_.capacity()) {
    s.reason_ = FinishReason::context_full;  // the id just drawn has no position left to be read at
  } else if (static_cast<int64_t>(s.reply_.size()) >= settings.sampling.max_new_tokens) {
    s.reason_ = FinishReason::length;
  }
}

void Engine::step(std::span<Sequence* const> sequences) {
  torch::NoGradGuard no_grad;
  std::vector<Sequence*> together;  // each continues its cache by the one id it drew last
  for (Sequence* s : sequences) {
    if (s->finished()) continue;
    if (s->unread() == 0) throw std::logic_error("Engine::step: a sequence with nothing to read (no reply started)");
    if (!s->settings_.slide_past_context && static_cast<int64_t>(s->ids_.size()) > s->cache_.capacity()) {
      s->reason_ = FinishReason::context_full;  // a prompt longer than the context
      continue;
    }
    const bool continues = kv_cache_ && s->unread() == 1 && s->cache_.length() > 0 && !s->cache_.full();
    if (continues) {
      together.push_back(s);
    } else {
      draw(*s, read_alone(*s));  // a prompt, a turn, a re-read window: this sequence joins the batch here
    }
  }
  if (together.empty()) return;
  const torch::Device device = model_->parameters().front().device();
  std::vector<int64_t> tokens;
  std::vector<KvCache*> caches;
  for (Sequence* s : together) {
    tokens.push_back(s->ids_[static_cast<size_t>(s->read_)]);
    caches.push_back(&s->cache_);
  }
  const auto logits = model_->decode_rows(torch::tensor(tokens, torch::kLong).to(device), caches);
  for (size_t i = 0; i < together.size(); ++i) {
    together[i]->read_ += 1;
    draw(*together[i], logits.narrow(0, static_cast<int64_t>(i), 1));
  }
}

}  // namespace mygpt
