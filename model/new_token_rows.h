#pragma once
// Rows of the token embedding (and of an untied head) for tokens a loaded model never saw: the chat tokens
// that fine-tuning (train --sft) places after the tokenizer's ids, in a model whose file had no rows for
// them (Hugging Face's GPT-2 of 50257). The model is built with its vocabulary padded to a multiple of 64
// and loaded with the padding rows zero; this gives the rows that will be used a starting point.
#include <cstdint>

#include "model/gpt.h"

namespace mygpt {

// Sets rows [first, end) of the token embedding, and of the head where it is not tied, to the mean of
// rows [0, first). A new token then starts as an average known token: its embedding in the range the
// blocks were trained on (zero rows would sit outside it), and in the head a logit near the average
// one, so that it neither dominates nor vanishes from the first softmax (transformers' resize_token_embeddings
// starts new rows around the same mean). Throws std::invalid_argument when the rows are not in the model.
void set_new_token_rows_to_mean(Gpt& model, int64_t first, int64_t end);
// The same for one weight of (rows, width) (the token embedding or the untied head).
void set_new_token_rows_to_mean(torch::Tensor weight, int64_t first, int64_t end);

}  // namespace mygpt
