#include "serving/chat_reply.h"

namespace mygpt {

SequenceSettings chat_reply_settings(const Gpt& model, const ChatFormat& format, const TextCodec& codec,
                                     SamplingOptions sampling) {
  const ChatSpecialTokens& t = format.tokens();
  auto banned = torch::zeros({model->config().vocab_size}, torch::kBool);
  banned.slice(0, codec.vocab_size()).fill_(true);
  for (int64_t id : {t.bos, t.user_start, t.user_end, t.assistant_start}) banned[id] = true;
  banned[t.assistant_end] = false;
  sampling.vocab_limit = 0;
  return SequenceSettings{.sampling = sampling, .end_ids = {t.assistant_end}, .banned = banned.to(
      model->parameters().front().device())};
}

}  // namespace mygpt
