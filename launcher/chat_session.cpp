#include "launcher/chat_session.h"

#include "common/strprintf.h"
#include "common/utf8_stream.h"
#include "serving/chat_reply.h"

namespace mygpt {

ChatSession::ChatSession(Gpt& model, const ChatFormat& format, const TextCodec& codec, SamplingOptions options,
                         std::string system)
    : format_(format),
      codec_(codec),
      system_(std::move(system)),
      engine_(model),
      sequence_(model, chat_reply_settings(model, format, codec, options)) {}

void ChatSession::reset() { sequence_.reset(); }

int64_t ChatSession::context_used() const { return sequence_.cached() + sequence_.unread(); }

std::vector<int64_t> ChatSession::turn_ids(std::string_view user_message, bool in_new_conversation) const {
  const bool started = !in_new_conversation && context_used() > 0;
  // The format renders a conversation's first turn after <|bos|>; a later turn is the same rendering
  // without the <|bos|> (the system message, too, belongs to the first turn only).
  std::vector<int64_t> turn = format_.render_prompt({}, user_message, started ? std::string_view{} : system_);
  if (started) turn.erase(turn.begin());
  return turn;
}

int64_t ChatSession::tokens_needed(std::string_view user_message, bool in_new_conversation) const {
  const bool started = !in_new_conversation && context_used() > 0;
  const int64_t unread = started ? sequence_.unread() : 0;
  // The turn, what is unread before it, and one token of reply.
  return unread + static_cast<int64_t>(turn_ids(user_message, in_new_conversation).size()) + 1;
}

bool ChatSession::fits(std::string_view user_message) const {
  return sequence_.cached() + tokens_needed(user_message) <= sequence_.capacity();
}

ChatReply ChatSession::reply(std::string_view user_message, const std::function<void(const std::string&)>& on_text,
                             const std::atomic<bool>* stop) {
  const std::vector<int64_t> turn = turn_ids(user_message, /*in_new_conversation=*/false);
  const int64_t needed = tokens_needed(user_message);
  if (sequence_.cached() + needed > sequence_.capacity()) {
    throw ConversationFull(strprintf("the message needs %lld tokens of context (and one to reply), and %lld of the "
                                     "model's %lld are left",
                                     static_cast<long long>(needed - 1),
                                     static_cast<long long>(sequence_.capacity() - sequence_.cached()),
                                     static_cast<long long>(sequence_.capacity())));
  }
  const int64_t end = format_.tokens().assistant_end;
  sequence_.start_reply(turn);

  ChatReply reply;
  Utf8StreamDecoder stream;
  auto show = [&](const std::string& text) {
    if (text.empty()) return;
    reply.text += text;
    if (on_text) on_text(text);
  };
  Sequence* const one[] = {&sequence_};
  while (!sequence_.finished()) {
    engine_.step(one);
    if (sequence_.finish_reason() == FinishReason::non_finite_logits) throw NonFiniteLogits();
    const int64_t last = sequence_.reply().back();
    reply.ids.push_back(last);
    if (last == end) {
      reply.finished = true;
      break;
    }
    show(stream.push(codec_.decode({last})));
    if (stop != nullptr && stop->load()) {
      reply.interrupted = true;
      sequence_.cancel();
      break;
    }
  }
  show(stream.finish());
  reply.outgrew = !reply.interrupted && sequence_.finish_reason() == FinishReason::context_full;
  // Cut short (stopped, out of context or of --max-new-tokens): the turn is closed for the model as if
  // it had ended it, so the next message starts a well-formed turn. (The last id drawn is still unread.)
  if (!reply.finished) sequence_.append(std::vector<int64_t>{end});
  return reply;
}

}  // namespace mygpt
