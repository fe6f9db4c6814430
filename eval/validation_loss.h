#pragma once
// The validation loss, in one place for `train` (every --eval-every steps) and `eval --val`, so that the two
// print the same number for the same model and batches (issue 66: they were twins that had drifted apart,
// fp32 against fp64 sums, and so were the two losses of held-out conversations).
//
// The loss is the mean over every trained target of all ranks' batches: every target of plain text, the
// assistant's tokens (and each <|assistant_end|>) of a conversation. The summed losses and the count of
// targets are kept in fp64 (MPS has none: fp32), so neither the ranks' order of adding nor the length of the
// pass shows in the printed digits. Batch b is rank b % W's (the loader, made with this rank and the world
// size, reads it), in rounds of one batch per rank with an optional stop check between rounds.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <limits>

#include "dataloader/batch_loader.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "eval/bits_per_byte.h"
#include "model/mixed_precision.h"

namespace mygpt {

struct ValidationPass {
  int64_t batches = 0;      // all ranks together (validation_batches(), or whole batches of conversations)
  int64_t vocab_limit = 0;  // the softmax over the first vocab_limit rows (the tokens, not the padding rows)
  // Conversations: targets below 0 (prompts, user turns, padding) are not trained, and the model sums the
  // others' losses itself (only those rows go through the head). Plain text: every target, loss per position.
  bool masked_targets = false;
  BitsPerByte* bpb = nullptr;  // plain text with a tokenizer: its sums too (reset at the start of the pass)
  // Asked between rounds, by every rank alike (a collective); true ends the pass early.
  std::function<bool()> stop;
  // Called on a rank that has no batch in a round (the last, when W does not divide the count): --zero 3's
  // idle forward, which the other ranks' gathers need.
  std::function<void()> sit_out;
  // After each round: batches done (all ranks) and this rank's running mean (for a progress line).
  std::function<void(int64_t done, double running_loss)> progress;
};

struct ValidationLoss {
  double loss = 0;     // the mean over the trained targets of all ranks
  double targets = 0;  // trained targets scored, all ranks
  double bits_per_byte = std::numeric_limits<double>::quiet_NaN();  // NaN without pass.bpb
  bool stopped = false;  // `stop` ended the pass: the numbers are not the whole pass's
};

// Scores pass.batches batches of `loader` (from where it stands) with `model` in evaluation mode (its
// training mode restored after), without gradients, under `precision`'s autocast. Every rank calls it.
ValidationLoss validation_loss(Gpt& model, BatchLoader& loader, const ValidationPass& pass, Communicator& comm,
                               const torch::Device& device, Precision precision);

}  // namespace mygpt
