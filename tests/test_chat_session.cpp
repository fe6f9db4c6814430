// The `chat` command's conversation (launcher/chat_session.h): with the KV cache kept across turns, each
// reply is the one a model re-reading the whole history for every token gives; the history the model
// reads is the chat format's rendering; a message too long for the context leaves the conversation as
// it was; a stopped reply closes the turn.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "dataloader/chat_format.h"
#include "tokenizer/text_codec.h"
#include "launcher/chat_session.h"
#include "model/gpt.h"

namespace mygpt::chat_session_test {
namespace {

constexpr int64_t kSpecialTokens = 5;

struct Fixture {
  std::unique_ptr<TextCodec> codec = make_char_codec_for("abcdefghijklmnopqrstuvwxyz ,.?!\n");
  Gpt model{nullptr};
  std::unique_ptr<ChatFormat> format;

  explicit Fixture(int64_t block_size) {
    torch::set_num_threads(1);
    GptConfig config = preset_config("tiny");  // 2 layers, 2 heads, width 32
    config.block_size = block_size;
    config.vocab_size = codec->vocab_size() + kSpecialTokens + 3;  // 3 rows of padding too
    torch::manual_seed(7);
    model = Gpt(config);
    // Large weights: wide margins between logits, so greedy choices do not hinge on the last bits of
    // float arithmetic (the cached and uncached paths order it differently).
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.copy_(0.5 * torch::randn_like(p));
    model->eval();
    format = std::make_unique<ChatFormat>(*codec, config.vocab_size);
  }
};

SamplingOptions greedy(int64_t max_new_tokens) { return SamplingOptions{max_new_tokens, 0.0, 0}; }

// The reference: no cache, the whole conversation re-read for every token, the same choice of ids
// (the tokenizer's, and <|assistant_end|>).
std::vector<int64_t> reference_reply(Fixture& f, std::vector<int64_t> history, int64_t max_new_tokens) {
  torch::NoGradGuard no_grad;
  const int64_t end = f.format->tokens().assistant_end;
  std::vector<int64_t> reply;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    auto logits = f.model->forward(torch::tensor(history, torch::kLong).unsqueeze(0)).select(1, -1).squeeze(0);
    auto allowed = logits.clone();
    allowed.slice(0, f.codec->vocab_size()).fill_(-std::numeric_limits<float>::infinity());
    allowed[end] = logits[end];
    const int64_t next = allowed.argmax().item<int64_t>();
    reply.push_back(next);
    history.push_back(next);
    if (next == end) break;
  }
  return reply;
}

std::vector<int64_t> without_bos(std::vector<int64_t> ids) {
  ids.erase(ids.begin());
  return ids;
}

TEST(ChatSession, EachTurnWithTheCacheEqualsRereadingTheWholeConversation) {
  Fixture f(/*block_size=*/256);
  const int64_t end = f.format->tokens().assistant_end;
  ChatSession session(f.model, *f.format, *f.codec, greedy(12), "be brief.");
  std::vector<int64_t> history;  // what the model has been shown, as the format renders it
  for (const std::string message : {"hello there", "what is a cat?", "and a dog?"}) {
    std::vector<int64_t> turn = f.format->render_prompt({}, message, history.empty() ? "be brief." : "");
    if (!history.empty()) {
      turn = without_bos(turn);
      if (history.back() != end) history.push_back(end);  // a reply cut short is closed for the model
    }
    history.insert(history.end(), turn.begin(), turn.end());
    const std::vector<int64_t> expected = reference_reply(f, history, 12);
    std::string streamed;
    const ChatReply reply = session.reply(message, [&](const std::string& text) { streamed += text; });
    EXPECT_EQ(reply.ids, expected) << "after \"" << message << "\"";
    EXPECT_EQ(reply.finished, !expected.empty() && expected.back() == end);
    std::vector<int64_t> text_ids = reply.ids;
    if (reply.finished) text_ids.pop_back();
    EXPECT_EQ(streamed, f.codec->decode(text_ids));
    EXPECT_EQ(reply.text, streamed);
    history.insert(history.end(), reply.ids.begin(), reply.ids.end());
    EXPECT_EQ(session.context_used(), static_cast<int64_t>(history.size()) + (reply.finished ? 0 : 1))
        << "the unread <|assistant_end|> of a cut reply counts";
  }
}

TEST(ChatSession, TheFirstTurnIsTheFormatsPromptAndLaterOnesDoNotRepeatBos) {
  Fixture f(/*block_size=*/256);
  ChatSession session(f.model, *f.format, *f.codec, greedy(3));
  // A reply's ids, and the <|assistant_end|> that closes it where the model did not write it.
  auto reply_length = [](const ChatReply& r) { return static_cast<int64_t>(r.ids.size()) + (r.finished ? 0 : 1); };
  const std::vector<int64_t> first = f.format->render_prompt({}, "hi");
  const ChatReply one = session.reply("hi");
  EXPECT_EQ(session.context_used(), static_cast<int64_t>(first.size()) + reply_length(one));
  const int64_t before = session.context_used();
  const ChatReply two = session.reply("ok");
  const int64_t second_turn = static_cast<int64_t>(f.format->render_prompt({}, "ok").size()) - 1;
  EXPECT_EQ(session.context_used(), before + second_turn + reply_length(two));
}

TEST(ChatSession, AMessageTooLongForWhatIsLeftLeavesTheConversationAsItWas) {
  Fixture f(/*block_size=*/48);
  ChatSession session(f.model, *f.format, *f.codec, greedy(4));
  session.reply("abc");
  const int64_t used = session.context_used();
  EXPECT_THROW(session.reply(std::string(60, 'a')), ConversationFull);
  EXPECT_EQ(session.context_used(), used);
  session.reset();
  EXPECT_EQ(session.context_used(), 0);
  EXPECT_NO_THROW(session.reply("abc")) << "a new conversation has room again";
}

TEST(ChatSession, TheContextFillingUpEndsTheReplyAndSaysSo) {
  Fixture f(/*block_size=*/24);
  ChatSession session(f.model, *f.format, *f.codec, greedy(100));
  const std::vector<int64_t> prompt = f.format->render_prompt({}, "abcdefghij");
  const ChatReply reply = session.reply("abcdefghij");
  if (reply.finished) GTEST_SKIP() << "this model ended its turn before the context filled";
  EXPECT_TRUE(reply.outgrew);
  EXPECT_EQ(static_cast<int64_t>(prompt.size() + reply.ids.size()), 24 + 1) << "every position used, one token unread";
  EXPECT_THROW(session.reply("a"), ConversationFull);
}

TEST(ChatSession, AStoppedReplyEndsAtOnceAndClosesTheTurn) {
  Fixture f(/*block_size=*/256);
  const std::vector<int64_t> expected_first = [&] {
    ChatSession plain(f.model, *f.format, *f.codec, greedy(8));
    return plain.reply("hello").ids;
  }();
  ChatSession session(f.model, *f.format, *f.codec, greedy(8));
  std::atomic<bool> stop{true};
  const ChatReply reply = session.reply("hello", {}, &stop);
  if (expected_first.front() == f.format->tokens().assistant_end) GTEST_SKIP() << "the model ends its turn at once";
  EXPECT_TRUE(reply.interrupted);
  EXPECT_EQ(reply.ids, std::vector<int64_t>{expected_first.front()});
  const int64_t prompt = static_cast<int64_t>(f.format->render_prompt({}, "hello").size());
  EXPECT_EQ(session.context_used(), prompt + 1 + 1) << "its token and <|assistant_end|> wait for the next turn";
}

TEST(ChatSession, SampledRepliesFollowTheSeed) {
  Fixture f(/*block_size=*/256);
  auto sample = [&] {
    torch::manual_seed(3);
    ChatSession session(f.model, *f.format, *f.codec, SamplingOptions{10, 1.0, 5});
    return session.reply("tell me").ids;
  };
  EXPECT_EQ(sample(), sample());
}

}  // namespace
}  // namespace mygpt::chat_session_test
