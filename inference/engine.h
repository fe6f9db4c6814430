#pragma once
// The one inference engine that `generate`, `chat` and `serve` share: each sequence (a sample, a
// conversation, a request) keeps its own KV cache and sampling state, and one Engine::step draws the next
// token of every sequence given together. A sequence that has a prompt to read reads it alone at that
// step; the ones that continue read their last token together in one batched forward (Gpt::decode_rows):
// every weight is read once per step for all of them, however far along each one is. So a sequence joins
// at the next step and leaves when it is done (continuous batching); a caller never waits for a batch to
// fill or to drain.
//
// Greedy decoding of a sequence gives the same ids batched as alone, on the CPU bit for bit (decode_rows),
// and the same as model/sampling.h's generate() on that prompt.
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/gpt.h"
#include "model/kv_cache.h"
#include "model/sampling.h"

namespace mygpt {

// How one sequence's tokens are drawn and where its replies may go.
struct SequenceSettings {
  // temperature, top_k, top_p, vocab_limit (ids at or above it never drawn; 0: every id); max_new_tokens:
  // each reply's length limit.
  SamplingOptions sampling;
  // Drawing one of these ends the reply (it is the reply's last id): a chat model's <|assistant_end|>.
  std::vector<int64_t> end_ids{};
  // Bool (vocab_size) on any device: ids never drawn (beside vocab_limit's); undefined: none.
  torch::Tensor banned{};
  // A CPU generator of its own seeded so (a request's seed: its sample does not depend on what else is
  // decoded beside it); none: the default generator of the model's device.
  std::optional<uint64_t> seed{};
  // Past the model's context: re-read the last block_size ids and go on (`generate`: the positions are
  // learned, so the cached keys cannot move) instead of ending the reply with context_full.
  bool slide_past_context = false;
};

enum class FinishReason {
  none,               // still going
  end_id,             // it drew one of its end ids
  length,             // max_new_tokens drawn
  context_full,       // the context is full and sliding is off: the last id drawn cannot be read
  non_finite_logits,  // the model gave NaN or infinite logits (weights that diverged)
  cancelled,          // Sequence::cancel
};

class Sequence {
 public:
  Sequence(const Gpt& model, SequenceSettings settings);

  // A new reply that continues the context from `ids` (a prompt; a chat turn after the history the cache
  // holds). Up to max_new_tokens ids are then drawn, one per Engine::step.
  void start_reply(std::span<const int64_t> ids);
  // Adds ids to read before the next id is drawn, without starting a reply (a chat turn cut short is
  // closed with <|assistant_end|>).
  void append(std::span<const int64_t> ids);
  // Ends the reply now (a client that went away, Ctrl-C): finish_reason() becomes cancelled.
  void cancel();
  // Forgets the whole context (the cache's memory is kept).
  void reset();

  bool finished() const { return reason_ != FinishReason::none; }
  FinishReason finish_reason() const { return reason_; }
  // The ids drawn in this reply so far (an end id included where one ended it).
  const std::vector<int64_t>& reply() const { return reply_; }
  // Positions of the context: read into the cache, and waiting to be read (the last id drawn, a turn).
  int64_t cached() const { return cache_.length(); }
  int64_t unread() const { return static_cast<int64_t>(ids_.size()) - read_; }
  int64_t capacity() const { return cache_.capacity(); }
  const SequenceSettings& settings() const { return settings_; }

 private:
  friend class Engine;
  SequenceSettings settings_;
  KvCache cache_;
  std::optional<at::Generator> generator_;
  std::vector<int64_t> ids_;    // the context: every id read or to be read (the window slides over it)
  int64_t read_ = 0;            // ids_[..read_) are in the cache (its positions: the last cache_.length())
  std::vector<int64_t> reply_;  // this reply's ids
  FinishReason reason_ = FinishReason::none;
};

class Engine {
 public:
  // model on its device, in eval mode; it must outlive the engine. kv_cache false re-reads each sequence's
  // whole window for every token (`generate --kv-cache false`, the reference the cache is tested against).
  explicit Engine(Gpt& model, bool kv_cache = true) : model_(model), kv_cache_(kv_cache) {}

  // Draws the next id of every unfinished sequence given (finished ones are skipped). Afterwards a
  // sequence's reply() has one more id, or it finished with a reason. A sequence must not be in two calls
  // at once; the engine holds no state between calls, so any set of sequences may go to each step.
  void step(std::span<Sequence* const> sequences);

  Gpt& model() const { return model_; }

 private:
  // The logits (1, vocab) after reading what `s` has not read: alone, through its cache.
  torch::Tensor read_alone(Sequence& s);
  void draw(Sequence& s, const torch::Tensor& logits);

  Gpt& model_;
  bool kv_cache_;
};

}  // namespace mygpt
