#pragma once
// What a chat model's reply may draw, for `chat` and `serve` alike: the tokenizer's ids and
// <|assistant_end|>, which ends it. The ids past the tokenizer's are padding or the format's special
// tokens, and a tokenizer's own chat tokens (below its size) are the format's, never a reply's.
#include "dataloader/chat_format.h"
#include "inference/engine.h"
#include "model/gpt.h"
#include "tokenizer/text_codec.h"

namespace mygpt {

// sampling: temperature, top_k, top_p, max_new_tokens (its vocab_limit is replaced by the mask).
SequenceSettings chat_reply_settings(const Gpt& model, const ChatFormat& format, const TextCodec& codec,
                                     SamplingOptions sampling);

}  // namespace mygpt
