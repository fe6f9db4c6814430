// Conversations for fine-tuning: records and their errors, cutting to the block, the batches (padding
// and masks, ranks), and the masked loss (what is trained, and its normalization).
#include <gtest/gtest.h>

#include "dataloader/chat_batch_loader.h"
#include "dataloader/chat_data.h"
#include "model/gpt.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"

namespace mygpt::chat_data_test {
namespace {

using testing::invalid_argument_message;
using testing::small_config;

constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz ?.\n";

struct CharChat {
  std::unique_ptr<TextCodec> codec = make_char_codec_for(kAlphabet);
  ChatFormat format{*codec, codec->vocab_size() + 5};
  int64_t vocab() const { return codec->vocab_size() + 5; }
};

TEST(ChatData, ParsesBothShapesAndNamesEachProblem) {
  const auto chat = parse_chat_record(
      R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]})");
  ASSERT_EQ(chat.size(), 3u);
  EXPECT_EQ(chat[0].role, ChatRole::system);
  EXPECT_EQ(chat[2].content, "yo");
  const auto pair = parse_chat_record(R"({"prompt":"2+2","completion":"4"})");
  ASSERT_EQ(pair.size(), 2u);
  EXPECT_EQ(pair[0].role, ChatRole::user);
  EXPECT_EQ(pair[1].role, ChatRole::assistant);

  auto problem = [](std::string_view line) { return invalid_argument_message([&] { parse_chat_record(line); }); };
  EXPECT_NE(problem(R"({"messages":[{"role":"tool","content":"x"}]})").find("unknown role 'tool'"), std::string::npos);
  EXPECT_NE(problem(R"({"messages":[{"role":"user","content":"x"}]})").find("no assistant turn"), std::string::npos);
  EXPECT_NE(problem("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(problem("{\"prompt\": ").find("not JSON"), std::string::npos);
  EXPECT_NE(problem("{\"prompt\":\"\xff\",\"completion\":\"x\"}").find("not UTF-8"), std::string::npos);
  EXPECT_NE(problem(R"({"text":"x"})").find("neither"), std::string::npos);
  EXPECT_NE(problem(R"({"prompt":"x","completion":3})").find("not a string"), std::string::npos);
  // Both shapes in one record: which one it means cannot be told (it was read as messages, silently).
  EXPECT_NE(problem(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"prompt":"c","completion":"d"})")
                .find("both \"messages\" and \"prompt\"/\"completion\""),
            std::string::npos);
  EXPECT_NE(problem(R"({"messages":[{"role":"user","content":"a","weight":0},{"role":"assistant","content":"b"}]})")
                .find("message 1 has a \"weight\", which only an assistant message may have"),
            std::string::npos);
  EXPECT_NE(problem(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","weight":0.5}]})")
                .find("message 2's \"weight\" is 0.5, not 0 or 1"),
            std::string::npos);
  EXPECT_NE(problem(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","weight":0}]})")
                .find("every assistant message has \"weight\": 0"),
            std::string::npos);
}

// OpenAI's fine-tuning format: an assistant message of "weight": 0 is context, not a target (it was
// trained on like any other).
TEST(ChatData, AnAssistantMessageOfWeightZeroIsNotTrained) {
  CharChat c;
  const auto weighted = parse_chat_record(
      R"({"messages":[{"role":"user","content":"ab"},{"role":"assistant","content":"bad","weight":0},)"
      R"({"role":"user","content":"a"},{"role":"assistant","content":"good","weight":1}]})");
  ASSERT_EQ(weighted.size(), 4u);
  EXPECT_FALSE(weighted[1].trained);
  EXPECT_TRUE(weighted[3].trained);
  const RenderedChat r = c.format.render_conversation(weighted);
  const RenderedChat all = c.format.render_conversation(parse_chat_record(
      R"({"messages":[{"role":"user","content":"ab"},{"role":"assistant","content":"bad"},)"
      R"({"role":"user","content":"a"},{"role":"assistant","content":"good"}]})"));
  EXPECT_EQ(r.ids, all.ids);  // the same context
  EXPECT_EQ(r.trained_count(), 5);  // "good" and its <|assistant_end|>
  EXPECT_EQ(all.trained_count(), 9);
}

TEST(ChatData, BadRecordNamesFileAndLineOrIsSkippedAndCounted) {
  ScratchDir dir;
  CharChat c;
  const auto path = dir.write("chat.jsonl", "{\"prompt\":\"hi\",\"completion\":\"yo\"}\n"
                                            "\n"
                                            "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}\n"
                                            "{\"prompt\":\"a\",\"completion\":\"b\"}\n");
  EXPECT_EQ(invalid_argument_message([&] { read_chat_examples(path, c.format, false); }),
            path.string() + ":3: message 1 has unknown role 'robot' (expected system, user or assistant) "
                            "(--skip-bad-records skips such records)");
  const ChatExamples read = read_chat_examples(path, c.format, true);
  EXPECT_EQ(read.conversations.size(), 2u);
  EXPECT_EQ(read.records, 3);
  EXPECT_EQ(read.bad_skipped, 1);
  const auto all_bad = dir.write("bad.jsonl", "nope\n");
  EXPECT_NE(invalid_argument_message([&] { read_chat_examples(all_bad, c.format, true); }).find("no good conversation"),
            std::string::npos);
}

// Empty turns and a question never answered were read silently (issue 64): an empty reply trained the model
// to end its turn at once, a trailing user turn spent rows on nothing. Each is a bad record now, named by
// file and line, or skipped and counted.
TEST(ChatData, EmptyTurnsAndAnUnansweredLastTurnAreBadRecords) {
  auto problem = [](std::string_view line) { return invalid_argument_message([&] { parse_chat_record(line); }); };
  EXPECT_EQ(problem(R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""}]})"),
            "message 2 is an empty assistant reply (\"content\": \"\")");
  EXPECT_EQ(problem(R"({"messages":[{"role":"user","content":""},{"role":"assistant","content":"yo"}]})"),
            "message 1 (a user message) has empty \"content\"");
  EXPECT_EQ(problem(R"({"messages":[{"role":"system","content":""},{"role":"user","content":"a"},)"
                    R"({"role":"assistant","content":"b"}]})"),
            "message 1 (a system message) has empty \"content\"");
  // An empty reply of weight 0 is still an empty turn in the context the others are trained on.
  EXPECT_EQ(problem(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"","weight":0},)"
                    R"({"role":"user","content":"b"},{"role":"assistant","content":"c"}]})"),
            "message 2 is an empty assistant reply (\"content\": \"\")");
  EXPECT_EQ(problem(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},)"
                    R"({"role":"user","content":"and then?"}]})"),
            "the conversation ends on a user turn (message 3) that no assistant reply answers");
  EXPECT_EQ(problem(R"({"prompt":"","completion":"x"})"), "the record's \"prompt\" is empty");
  EXPECT_EQ(problem(R"({"prompt":"x","completion":""})"), "the record's \"completion\" is empty");
  // A reply of spaces is text (the model may be taught to answer so); only nothing at all is refused.
  EXPECT_EQ(parse_chat_record(R"({"prompt":"x","completion":" "})").size(), 2u);

  ScratchDir dir;
  CharChat c;
  const auto path = dir.write("chat.jsonl", "{\"prompt\":\"hi\",\"completion\":\"yo\"}\n"
                                            "{\"prompt\":\"hi\",\"completion\":\"\"}\n"
                                            "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                                            "{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]}\n"
                                            "{\"messages\":[{\"role\":\"user\",\"content\":\"\"},"
                                            "{\"role\":\"assistant\",\"content\":\"b\"}]}\n");
  EXPECT_EQ(invalid_argument_message([&] { read_chat_examples(path, c.format, false); }),
            path.string() + ":2: the record's \"completion\" is empty (--skip-bad-records skips such records)");
  const ChatExamples read = read_chat_examples(path, c.format, true);
  EXPECT_EQ(read.conversations.size(), 1u);
  EXPECT_EQ(read.records, 4);
  EXPECT_EQ(read.bad_skipped, 3);
  // A chat prompt is no training record: an empty message there is the user's to send.
  EXPECT_NO_THROW(c.format.render_prompt({}, ""));
}

TEST(ChatData, LongConversationsAreCutAndThoseLeftWithoutRepliesDropped) {
  CharChat c;
  const std::vector<ChatMessage> short_one{{ChatRole::user, "hi"}, {ChatRole::assistant, "yo"}};
  const std::vector<ChatMessage> long_prompt{{ChatRole::user, "a very long question indeed"},
                                             {ChatRole::assistant, "no"}};
  const std::vector<RenderedChat> rendered{c.format.render_conversation(short_one),
                                           c.format.render_conversation(long_prompt)};
  const BlockConversations block = cut_to_block(rendered, 12);
  EXPECT_EQ(block.cut, 1);
  EXPECT_EQ(block.nothing_left, 1);
  ASSERT_EQ(block.conversations.size(), 1u);
  EXPECT_NE(block.note("training conversations", 11).find("1 conversation(s) longer than --seq-len 11"),
            std::string::npos);
}

// Conversations of different lengths, each with a different number of trained tokens.
std::shared_ptr<const std::vector<RenderedChat>> varied_conversations(const ChatFormat& format, int count) {
  auto out = std::make_shared<std::vector<RenderedChat>>();
  for (int i = 0; i < count; ++i) {
    const std::string question(static_cast<size_t>(1 + i % 4), static_cast<char>('a' + i % 26));
    const std::string answer(static_cast<size_t>(1 + (i * 7) % 5), static_cast<char>('z' - i % 26));
    out->push_back(format.render_conversation(
        std::vector<ChatMessage>{{ChatRole::user, question}, {ChatRole::assistant, answer}}));
  }
  return out;
}

TEST(ChatBatchLoader, RowsArePaddedOnTheRightAndOnlyAssistantTokensAreTargets) {
  CharChat c;
  const auto conversations = varied_conversations(c.format, 3);
  ChatBatchLoader loader(conversations, 3, 16, /*pad_id=*/0, /*shuffle=*/false, 1);
  const Batch batch = loader.next(torch::kCPU);
  for (int64_t row = 0; row < 3; ++row) {
    const RenderedChat& r = (*conversations)[static_cast<size_t>(row)];
    const auto n = static_cast<int64_t>(r.ids.size());
    for (int64_t t = 0; t < 16; ++t) {
      const int64_t x = batch.x[row][t].item<int64_t>(), y = batch.y[row][t].item<int64_t>();
      if (t + 1 < n) {
        EXPECT_EQ(x, r.ids[static_cast<size_t>(t)]);
        EXPECT_EQ(y, r.trained[static_cast<size_t>(t + 1)] ? r.ids[static_cast<size_t>(t + 1)] : kUntrainedTarget);
      } else {
        EXPECT_EQ(x, 0) << "padding";
        EXPECT_EQ(y, kUntrainedTarget) << "padding is never a target";
      }
    }
    EXPECT_EQ(batch.y[row].ge(0).sum().item<int64_t>(), r.trained_count());
  }
}

TEST(ChatBatchLoader, RanksTogetherReadTheBatchesOfOneProcessAndResumeExactly) {
  CharChat c;
  const auto conversations = varied_conversations(c.format, 7);
  // One process reading 6 batches == 3 ranks reading 2 each (rank r: batches r, r + 3).
  ChatBatchLoader one(conversations, 2, 12, 0, /*shuffle=*/true, 5);
  std::vector<Batch> single;
  for (int i = 0; i < 6; ++i) single.push_back(one.next(torch::kCPU));
  for (int rank = 0; rank < 3; ++rank) {
    ChatBatchLoader mine(conversations, 2, 12, 0, true, 5, rank, 3);
    for (int micro = 0; micro < 2; ++micro) {
      EXPECT_TRUE(torch::equal(mine.next(torch::kCPU).y, single[static_cast<size_t>(micro * 3 + rank)].y));
    }
  }
  // The state is one position; restored, the loader continues where it was.
  ChatBatchLoader resumed(conversations, 2, 12, 0, true, 5);
  ChatBatchLoader first(conversations, 2, 12, 0, true, 5);
  for (int i = 0; i < 3; ++i) first.next(torch::kCPU);
  resumed.load_state(first.state());
  EXPECT_TRUE(torch::equal(resumed.next(torch::kCPU).x, single[3].x));
}

// d(loss)/d(every parameter), flattened, for the SFT loss over one batch.
torch::Tensor sft_gradient(Gpt& model, const Batch& batch) {
  model->zero_grad();
  (model->loss(batch.x, batch.y, LossReduction::sum) / batch.y.ge(0).sum()).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().flatten().clone());
  return torch::cat(grads);
}

Batch batch_of(const ChatFormat& format, const std::vector<ChatMessage>& messages) {
  auto one = std::make_shared<std::vector<RenderedChat>>(1, format.render_conversation(messages));
  return ChatBatchLoader(one, 1, 24, 0, false, 1).next(torch::kCPU);
}

TEST(MaskedLoss, UserTokensTrainNothingAssistantTokensDo) {
  CharChat c;
  torch::manual_seed(3);
  Gpt model(small_config(c.vocab(), 32));
  // The last user turn comes after the only trained reply (its answer has weight 0): it changes neither
  // the reply's inputs nor its targets (attention is causal), so with the user's tokens untrained the
  // gradient stays exactly the same. A plain (unmasked) loss would train on it and differ.
  const std::vector<ChatMessage> base{{ChatRole::user, "abc"}, {ChatRole::assistant, "xy"}, {ChatRole::user, "hello"},
                                      {ChatRole::assistant, "ok", /*trained=*/false}};
  auto other_user = base;
  other_user[2].content = "world";
  auto other_reply = base;
  other_reply[1].content = "xz";
  const torch::Tensor g = sft_gradient(model, batch_of(c.format, base));
  EXPECT_TRUE(torch::equal(g, sft_gradient(model, batch_of(c.format, other_user))));
  EXPECT_FALSE(torch::allclose(g, sft_gradient(model, batch_of(c.format, other_reply))));
  const Batch plain = batch_of(c.format, base);
  EXPECT_GT(plain.y.ge(0).sum().item<int64_t>(), 0);
}

TEST(MaskedLoss, IsTheSumOverTrainedTargetsOfTheFullCrossEntropy) {
  CharChat c;
  torch::manual_seed(4);
  Gpt model(small_config(c.vocab(), 32));
  torch::manual_seed(4);
  Gpt unfused(small_config(c.vocab(), 32), GptRuntime{.fused_loss = false});  // the same weights
  ChatBatchLoader loader(varied_conversations(c.format, 4), 4, 12, 0, false, 1);
  const Batch batch = loader.next(torch::kCPU);
  const torch::Tensor logits = model->forward(batch.x).reshape({-1, c.vocab()});
  const torch::Tensor expected = torch::nn::functional::cross_entropy(
      logits, batch.y.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kUntrainedTarget).reduction(torch::kSum));
  EXPECT_NEAR(model->loss(batch.x, batch.y, LossReduction::sum).item<double>(), expected.item<double>(), 1e-4);
  EXPECT_NEAR(unfused->loss(batch.x, batch.y, LossReduction::sum).item<double>(), expected.item<double>(), 1e-4);
  // No trained target: a zero that still reaches every parameter (gradient sync waits for all).
  const torch::Tensor none = torch::full_like(batch.y, kUntrainedTarget);
  const torch::Tensor zero = unfused->loss(batch.x, none, LossReduction::sum);
  EXPECT_EQ(zero.item<double>(), 0.0);
  zero.backward();
  for (const auto& p : unfused->parameters()) EXPECT_TRUE(p.grad().defined());
}

}  // namespace
}  // namespace mygpt::chat_data_test
