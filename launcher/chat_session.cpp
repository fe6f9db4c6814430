#include "launcher/chat_session.h"

#include <limits>

#include "common/strprintf.h"
#include "common/utf8_stream.h"

namespace mygpt {

ChatSession::ChatSession(Gpt& model, const ChatFormat& format, const TextCodec& codec, SamplingOptions options,
                         std::string system)
    : model_(model),
      format_(format),
      codec_(codec),
      options_(options),
      system_(std::move(system)),
      cache_(model->make_kv_cache()) {
  options_.vocab_limit = codec.vocab_size();
}

void ChatSession::reset() {
  cache_.clear();
  unread_.clear();
}

int64_t ChatSession::context_used() const { return cache_.length() + static_cast<int64_t>(unread_.size()); }

std::vector<int64_t> ChatSession::turn_ids(std::string_view user_message, bool in_new_conversation) const {
  const bool started = !in_new_conversation && context_used() > 0;
  // The format renders a conversation's first turn after <|bos|>; a later turn is the same rendering
  // without the <|bos|> (the system message, too, belongs to the first turn only).
  std::vector<int64_t> turn = format_.render_prompt({}, user_message, started ? std::string_view{} : system_);
  if (started) turn.erase(turn.begin());
  std::vector<int64_t> ids = started ? unread_ : std::vector<int64_t>{};
  ids.insert(ids.end(), turn.begin(), turn.end());
  return ids;
}

int64_t ChatSession::tokens_needed(std::string_view user_message, bool in_new_conversation) const {
  return static_cast<int64_t>(turn_ids(user_message, in_new_conversation).size()) + 1;  // and one token of reply
}

bool ChatSession::fits(std::string_view user_message) const {
  return cache_.length() + tokens_needed(user_message) <= cache_.capacity();
}

ChatReply ChatSession::reply(std::string_view user_message, const std::function<void(const std::string&)>& on_text,
                             const std::atomic<bool>* stop) {
  const std::vector<int64_t> ids = turn_ids(user_message, /*in_new_conversation=*/false);
  const int64_t needed = static_cast<int64_t>(ids.size()) + 1;  // and one token of reply
  if (cache_.length() + needed > cache_.capacity()) {
    throw ConversationFull(strprintf("the message needs %lld tokens of context (and one to reply), and %lld of the "
                                     "model's %lld are left",
                                     static_cast<long long>(needed - 1),
                                     static_cast<long long>(cache_.capacity() - cache_.length()),
                                     static_cast<long long>(cache_.capacity())));
  }

  torch::NoGradGuard no_grad;
  const torch::Device device = model_->parameters().front().device();
  const int64_t end = format_.tokens().assistant_end;
  auto logits = model_->forward(torch::tensor(ids, torch::kLong).unsqueeze(0).to(device),
                                {.cache = &cache_, .last_position_only = true});
  unread_.clear();

  ChatReply reply;
  Utf8StreamDecoder stream;
  auto show = [&](const std::string& text) {
    if (text.empty()) return;
    reply.text += text;
    if (on_text) on_text(text);
  };
  int64_t last = -1;  // the newest sampled token, not yet read by the model
  for (int64_t i = 0; i < options_.max_new_tokens; ++i) {
    logits = logits.to(torch::kFloat);
    if (!torch::isfinite(logits).all().item<bool>()) throw NonFiniteLogits();
    // Ids past the tokenizer's are padding or special tokens: only <|assistant_end|> may be drawn.
    auto allowed = limit_vocab(logits, options_.vocab_limit);
    allowed.select(-1, end).copy_(logits.select(-1, end));
    // A tokenizer's own chat tokens lie below the limit: the other four are the format's, never a reply's.
    const ChatSpecialTokens& t = format_.tokens();
    for (int64_t id : {t.bos, t.user_start, t.user_end, t.assistant_start}) {
      allowed.select(-1, id).fill_(-std::numeric_limits<float>::infinity());
    }
    last = sample_next(allowed, options_).item<int64_t>();
    reply.ids.push_back(last);
    if (last == end) {
      reply.finished = true;
      unread_ = {end};
      break;
    }
    show(stream.push(codec_.decode({last})));
    if (stop != nullptr && stop->load()) {
      reply.interrupted = true;
      break;
    }
    if (cache_.full()) {
      reply.outgrew = true;
      break;
    }
    logits = model_->forward(torch::tensor({last}, torch::kLong).view({1, 1}).to(device),
                             {.cache = &cache_, .last_position_only = true});
    last = -1;
  }
  show(stream.finish());
  if (!reply.finished) {
    // Cut short (stopped, out of context or of --max-new-tokens): the turn is closed for the model as if
    // it had ended it, so the next message starts a well-formed turn.
    if (last >= 0) unread_.push_back(last);
    unread_.push_back(end);
  }
  return reply;
}

}  // namespace mygpt
