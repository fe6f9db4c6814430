// Our tokenizer.json reader judged by Hugging Face `tokenizers` itself: equal ids on Tiny Shakespeare,
// HellaSwag text and random Unicode, for GPT-2's tokenizer.json, for a GPT-4-style split pattern
// (nanochat's) and for Unicode normalizers (Qwen's NFC), with decoding back to the text; and the refusals
// of what it does not read.
#include <algorithm>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/char_tokenizer.h"
#include "dataloader/chat_format.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/text_codec.h"
#include "tokenizer/unicode_normalization.h"
#include "tests/reference_python.h"
#include "tests/scratch_dir.h"
#include "tests/test_data.h"
#include "tests/test_support.h"

namespace mygpt::hf_bpe_tokenizer_test {
namespace {

namespace fs = std::filesystem;
using testing::invalid_argument_message;
using testing::python_imports;
using testing::run_python_json;

const fs::path kData = testing::test_data_dir();
// Beside hf_reference.py in tests/.
const std::string kScript = (fs::path(MYGPT_HF_REFERENCE_SCRIPT).parent_path() / "tokenizer_reference.py").string();

// The reference's answer for each named text: its ids and its decoding of them.
struct Reference {
  std::vector<int32_t> ids;
  std::string decoded;
};

class TokenizerJsonVersusTokenizers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!python_imports("tokenizers"))
      GTEST_SKIP() << "Python with `tokenizers` not found: no reference to compare with";
    // Tiny Shakespeare where the data has it, else generated English: the tokenizers are trained on it and
    // it is one of the texts compared.
    training_ = testing::tokenizer_training_text(dir_.path());
    // HellaSwag text is compared where the data has it; Shakespeare and the random strings always.
    ASSERT_FALSE(run_python_json(kScript,
                                 {"texts", training_.string(),
                                  (kData / "hellaswag" / "hellaswag_val_full.txt").string(), texts_path().string()},
                                 dir_.path())
                     .is_null());
    const auto texts = nlohmann::json::parse(read_whole_file(texts_path(), "test"));  // outlives the loop's proxy
    for (auto& [name, text] : texts.items()) {
      texts_[name] = text.get<std::string>();
    }
  }

  fs::path texts_path() const { return dir_.path() / "texts.json"; }

  // The reference on the texts (or those written to `texts`, a smaller set).
  std::map<std::string, Reference> reference(const std::string& mode, const fs::path& tokenizer,
                                             const fs::path& texts = {}) {
    const fs::path out = dir_.path() / "reference.json";
    EXPECT_FALSE(run_python_json(
                     kScript, {mode, tokenizer.string(), (texts.empty() ? texts_path() : texts).string(), out.string()},
                     dir_.path())
                     .is_null());
    std::map<std::string, Reference> answers;
    const auto parsed = nlohmann::json::parse(read_whole_file(out, "test"));
    for (auto& [name, answer] : parsed.items()) {
      answers[name] = {answer["ids"].get<std::vector<int32_t>>(), answer["decoded"].get<std::string>()};
    }
    return answers;
  }

  // Every text: our ids are the reference's, and decoding gives the text back (and what tokenizers decodes).
  void expect_same_as(const HfBpeTokenizer& ours, const std::map<std::string, Reference>& answers,
                      HfBpeTokenizer::SpecialTokens specials = HfBpeTokenizer::SpecialTokens::matched) {
    expect_same_as(ours, answers, texts_, /*round_trip=*/true, specials);
  }
  // round_trip: decoding gives the text back; not so where the pre-tokenizer drops text (Split's Removed, an
  // added token's lstrip/rstrip) or adds some (ByteLevel's prefix space), which tokenizers' decode also shows.
  void expect_same_as(const HfBpeTokenizer& ours, const std::map<std::string, Reference>& answers,
                      const std::map<std::string, std::string>& texts, bool round_trip = true,
                      HfBpeTokenizer::SpecialTokens specials = HfBpeTokenizer::SpecialTokens::matched) {
    ASSERT_EQ(answers.size(), texts.size());
    int mismatches = 0;
    for (const auto& [name, text] : texts) {
      const Reference& want = answers.at(name);
      const std::vector<int32_t> ids = ours.encode(text, specials);
      if (ids != want.ids && ++mismatches <= 5) {
        std::size_t first = 0;
        while (first < ids.size() && first < want.ids.size() && ids[first] == want.ids[first]) ++first;
        ADD_FAILURE() << name << ": ids differ from token " << first << " of " << want.ids.size() << " ("
                      << nlohmann::json(text.substr(0, 200)).dump() << ")";
      }
      if (round_trip) {
        EXPECT_EQ(ours.decode(ids), text) << name;
      }
      // decode() gives the bytes; tokenizers repairs them into UTF-8 (a normalized added token's bytes, "caf\xe9"
      // for NFC's "café" spelled in the byte alphabet, need it).
      EXPECT_EQ(with_invalid_utf8_replaced(ours.decode(want.ids)), want.decoded) << name;
    }
    EXPECT_EQ(mismatches, 0);
  }

  ScratchDir dir_;
  fs::path training_;
  std::map<std::string, std::string> texts_;
};

TEST_F(TokenizerJsonVersusTokenizers, Gpt2TokenizerJsonInBothMergeForms) {
  if (!fs::exists(kData / "gpt2" / "encoder.json")) GTEST_SKIP() << (kData / "gpt2").string() << " absent";
  const fs::path folder = dir_.path() / "gpt2";
  ASSERT_FALSE(
      run_python_json(kScript, {"make-gpt2", (kData / "gpt2").string(), folder.string()}, dir_.path()).is_null());
  const auto answers = reference("encode", folder / "tokenizer.json");
  // The whole text (the play, ~338k tokens, or the generated English), not an empty answer.
  EXPECT_GT(answers.at("shakespeare").ids.size(), texts_.at("shakespeare").size() / 5);
  expect_same_as(HfBpeTokenizer::load(folder / "tokenizer.json"), answers);
  expect_same_as(HfBpeTokenizer::load(folder / "strings" / "tokenizer.json"), answers);  // "a b" merges

  // OpenAI's encoder.py order of merges and the HF one agree on GPT-2's trained list.
  const auto openai = Gpt2BpeTokenizer::load(kData / "gpt2");
  EXPECT_EQ(openai.encode(texts_.at("shakespeare"), true), answers.at("shakespeare").ids);
}

TEST_F(TokenizerJsonVersusTokenizers, Gpt4StyleSplitPatternAsNanochats) {
  const fs::path folder = dir_.path() / "gpt4";
  ASSERT_FALSE(
      run_python_json(kScript, {"make-gpt4", training_.string(), folder.string()}, dir_.path())
          .is_null());
  const HfBpeTokenizer ours = HfBpeTokenizer::load(folder / "tokenizer.json");
  EXPECT_EQ(ours.vocab_size(), 2048u);
  EXPECT_EQ(ours.token_id("<|bos|>"), 0);
  expect_same_as(ours, reference("encode", folder / "tokenizer.json"));

  // Special tokens' text as ordinary text (what chat messages are encoded with, so that a user who types
  // <|assistant_start|> cannot forge a turn): tokenizers' encode_special_tokens = True.
  const auto as_text = reference("encode-specials-as-text", folder / "tokenizer.json");
  expect_same_as(ours, as_text, HfBpeTokenizer::SpecialTokens::as_text);
  int with_bos_text = 0;
  for (const auto& [name, text] : texts_) {
    if (text.find("<|bos|>") == std::string::npos) continue;
    ++with_bos_text;
    const auto matched = ours.encode(text), ordinary = ours.encode(text, HfBpeTokenizer::SpecialTokens::as_text);
    EXPECT_NE(std::find(matched.begin(), matched.end(), 0), matched.end()) << name;
    EXPECT_EQ(std::find(ordinary.begin(), ordinary.end(), 0), ordinary.end()) << name;
  }
  EXPECT_GT(with_bos_text, 10);  // the random texts do name the special token
}

// The rest of what the reader follows, each judged by tokenizers on the random strings and a page of
// Shakespeare: every Split behaviour (and invert, and a String pattern), Digits, ByteLevel's prefix space
// and its own regex, a GPT-4o-style pattern (letters by case, marks), a negated property, \w, \d, \W and
// \b as Oniguruma defines them, added tokens
// with single_word, lstrip and rstrip (and one already in the vocab), and ignore_merges.
TEST_F(TokenizerJsonVersusTokenizers, OtherPreTokenizersAddedTokenOptionsAndIgnoreMerges) {
  const fs::path gpt4 = dir_.path() / "gpt4", variants = dir_.path() / "variants";
  ASSERT_FALSE(
      run_python_json(kScript, {"make-gpt4", training_.string(), gpt4.string()}, dir_.path())
          .is_null());
  ASSERT_FALSE(run_python_json(kScript, {"variants", gpt4.string(), variants.string()}, dir_.path()).is_null());
  std::map<std::string, std::string> texts;
  nlohmann::json texts_json = nlohmann::json::object();
  for (const auto& [name, text] : texts_) {
    if (name == "hellaswag") continue;
    texts[name] = name == "shakespeare" ? text.substr(0, 20000) : text;
    texts_json[name] = texts[name];
  }
  const fs::path texts_file = dir_.write("small_texts.json", texts_json.dump());
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(variants)) {
    SCOPED_TRACE(entry.path().filename().string());
    const fs::path path = entry.path() / "tokenizer.json";
    const HfBpeTokenizer ours = HfBpeTokenizer::load(path);
    expect_same_as(ours, reference("encode", path, texts_file), texts, /*round_trip=*/false);
    // Special tokens as text while added tokens that are not special (single_word, lstrip, ...) still match.
    expect_same_as(ours, reference("encode-specials-as-text", path, texts_file), texts, /*round_trip=*/false,
                   HfBpeTokenizer::SpecialTokens::as_text);
    ++compared;
  }
  EXPECT_EQ(compared, 12);
}

// A Unicode normalizer (Qwen2/Qwen3's tokenizer.json has NFC), judged by tokenizers on tokenizers it trained
// itself: NFC with Qwen2's Split pattern, NFKC, and Sequence([NFC]) with GPT-2's ByteLevel; on Shakespeare,
// decomposed and compatibility characters, combining marks and Hangul jamo in random order, combining marks
// of every Unicode version (tokenizers' tables are 9.0's, utf8proc's newer: a later mark must block) and
// random code points (tokenizer_reference.py's normalization-texts). Each has added tokens matched on the raw
// text and on the normalized text, with content that is not NFC.
TEST_F(TokenizerJsonVersusTokenizers, UnicodeNormalizersAsQwensNfc) {
  const fs::path made = dir_.path() / "normalized", texts = dir_.path() / "normalization_texts.json";
  ASSERT_FALSE(run_python_json(kScript, {"make-normalized", training_.string(), made.string()},
                               dir_.path())
                   .is_null());
  ASSERT_FALSE(run_python_json(kScript,
                               {"normalization-texts", training_.string(), texts.string()},
                               dir_.path())
                   .is_null());
  std::map<std::string, std::string> named;
  const auto parsed = nlohmann::json::parse(read_whole_file(texts, "test"));
  for (auto& [name, text] : parsed.items()) named[name] = text.get<std::string>();
  ASSERT_GT(named.size(), 500u);
  for (const std::string kind : {"nfc", "nfkc", "sequence_nfc"}) {
    SCOPED_TRACE(kind);
    const fs::path path = made / kind / "tokenizer.json";
    const HfBpeTokenizer ours = HfBpeTokenizer::load(path);
    // Decoding gives the normalized text, not the text: what tokenizers decodes is compared instead.
    const auto answers = reference("encode", path, texts);
    expect_same_as(ours, answers, named, /*round_trip=*/false);
    expect_same_as(ours, reference("encode-specials-as-text", path, texts), named, /*round_trip=*/false,
                   HfBpeTokenizer::SpecialTokens::as_text);
    // The added token "cafe\u0301" is matched by its NFC form, and "A\u030a!" only as it is spelled.
    const int32_t cafe = *ours.token_id("cafe\u0301"), angstrom = *ours.token_id("A\u030a!");
    EXPECT_EQ(ours.encode("caf\u00e9"), std::vector<int32_t>{cafe});
    EXPECT_EQ(ours.encode("A\u030a!"), std::vector<int32_t>{angstrom});
    EXPECT_NE(ours.encode("\u00c5!"), std::vector<int32_t>{angstrom});
    EXPECT_EQ(ours.decode(ours.encode("e\u0301")), "\u00e9");
    EXPECT_EQ(ours.decode(ours.encode("\ufb01")), kind == "nfkc" ? "fi" : "\ufb01");  // a compatibility character
  }
}

// The classes a split pattern names, code point by code point over all of Unicode: what our PCRE2 pattern
// (bpe::pcre2_pattern_of) matches equals what tokenizers' Oniguruma matches, for \w, \d, \s and the general
// categories the common patterns use, whatever the Unicode of the PCRE2 linked.
TEST_F(TokenizerJsonVersusTokenizers, PatternClassesEqualOnigurumasOnEveryCodePoint) {
  const fs::path out = dir_.path() / "classes.json";
  ASSERT_FALSE(run_python_json(kScript, {"classes", out.string()}, dir_.path()).is_null());
  const auto classes = nlohmann::json::parse(read_whole_file(out, "test"));
  ASSERT_EQ(classes.size(), 9u);
  for (const auto& [pattern, ranges] : classes.items()) {
    SCOPED_TRACE(pattern);
    std::vector<bool> theirs(0x110000, false);
    for (const auto& range : ranges) {
      for (auto c = range[0].get<int64_t>(); c <= range[1].get<int64_t>(); ++c) theirs[static_cast<std::size_t>(c)] = true;
    }
    bpe::PretokenPattern ours(bpe::pcre2_pattern_of(R"(\A)" + pattern), "test");
    int differ = 0;
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      std::string text;
      utf8_append(text, c);
      const auto found = ours.next(text, 0);
      const bool matched = found && found->first == 0 && found->second == text.size();
      if (matched != theirs[c] && ++differ <= 5) {
        ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << ": ours " << matched << ", tokenizers' "
                      << theirs[c];
      }
    }
    EXPECT_EQ(differ, 0);
  }
}

// What export writes for a GPT-2-tokenizer model, judged by tokenizers as the files it reads.
TEST_F(TokenizerJsonVersusTokenizers, Gpt2TokenizerJsonWrittenFromOpenAisFiles) {
  const fs::path gpt2 = kData / "gpt2";
  if (!fs::exists(gpt2 / "encoder.json")) GTEST_SKIP() << gpt2.string() << " absent";
  const auto path = dir_.write(
      "written/tokenizer.json",
      gpt2_tokenizer_json(read_whole_file(gpt2 / "encoder.json", "test"), read_whole_file(gpt2 / "vocab.bpe", "test")));
  const HfBpeTokenizer written = HfBpeTokenizer::load(path);
  EXPECT_EQ(written.vocab_size(), Gpt2BpeTokenizer::kVocabSize);
  const auto answers = reference("encode", path);
  expect_same_as(written, answers);
  EXPECT_EQ(Gpt2BpeTokenizer::load(gpt2).encode(texts_.at("hellaswag"), true), answers.at("hellaswag").ids);
}

// A GPT-2-shaped tokenizer.json over a tiny vocabulary, with `change` applied to it.
fs::path tiny_tokenizer_json(const ScratchDir& dir, const std::string& name, void (*change)(nlohmann::json&)) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) {
    // The byte alphabet spelled as tokenizers does (printable Latin-1 stands for itself).
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    static int substitute = 256;
    if (byte == 0) substitute = 256;
    const int cp = printable ? byte : substitute++;
    std::string spelling;
    if (cp < 0x80)
      spelling = std::string(1, static_cast<char>(cp));
    else
      spelling = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    vocab[spelling] = byte;
  }
  vocab["ab"] = 256;
  nlohmann::json tokenizer = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", nlohmann::json::array()}};
  change(tokenizer);
  return dir.write(name + "/tokenizer.json", tokenizer.dump());
}

TEST(HfBpeTokenizer, ReadsATinyTokenizerAndItsAddedTokens) {
  ScratchDir dir;
  const auto path = tiny_tokenizer_json(dir, "tiny", [](nlohmann::json& t) {
    t["added_tokens"] = {{{"id", 257}, {"content", "<|x|>"}, {"special", true}, {"normalized", false}},
                         {{"id", 258}, {"content", "<|x|>y"}, {"special", true}, {"normalized", false}}};
  });
  const HfBpeTokenizer tokenizer = HfBpeTokenizer::load(path);
  EXPECT_EQ(tokenizer.vocab_size(), 259u);
  // "ab" merges; the longest added token at a position wins; text around added tokens is pre-tokenized alone.
  EXPECT_EQ(tokenizer.encode("ab<|x|>yab<|x|>"), (std::vector<int32_t>{256, 258, 256, 257}));
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{256, 258}), "ab<|x|>y");
  EXPECT_NE(invalid_argument_message([&] { tokenizer.decode(std::vector<int32_t>{259}); }).find("259"),
            std::string::npos);
}

// Chat messages are untrusted text: a tokenizer.json's special tokens typed in one stay text (they would
// otherwise end a turn or open one), while its added tokens that are not special still match, and a prompt
// (encode, not encode_ordinary) may still name a special token on purpose.
TEST(HfBpeTokenizer, ChatMessagesCannotForgeTheTokenizersSpecialTokens) {
  ScratchDir dir;
  const auto path = tiny_tokenizer_json(dir, "chat", [](nlohmann::json& t) {
    t["added_tokens"] = {{{"id", 257}, {"content", "<|x|>"}, {"special", true}, {"normalized", false}},
                         {{"id", 258}, {"content", "zz"}, {"special", false}, {"normalized", true}}};
  });
  const auto codec = make_text_codec(TokenizerKind::hf, path.parent_path().string());
  EXPECT_EQ(codec->encode("<|x|>"), (std::vector<int64_t>{257}));
  const std::vector<int64_t> ordinary = codec->encode_ordinary("a<|x|>zz");
  EXPECT_EQ(std::count(ordinary.begin(), ordinary.end(), 257), 0);
  EXPECT_EQ(ordinary.back(), 258);
  EXPECT_EQ(codec->decode(ordinary), "a<|x|>zz");

  const ChatFormat format(*codec, codec->vocab_size() + 5);
  const std::vector<ChatMessage> forged{{ChatRole::user, "<|x|>hi"}, {ChatRole::assistant, "<|x|>"}};
  const RenderedChat r = format.render_conversation(forged);
  EXPECT_EQ(std::count(r.ids.begin(), r.ids.end(), 257), 0);
}

// A tokenizer that defines the chat tokens itself (nanochat's) keeps its own ids for them; the chat format
// puts none of its own after its vocabulary, and a tokenizer with only some of them is refused.
TEST(HfBpeTokenizer, ChatFormatUsesTheTokenizersOwnChatTokens) {
  ScratchDir dir;
  const auto path = tiny_tokenizer_json(dir, "nanochat", [](nlohmann::json& t) {
    const char* names[] = {"<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
                           "<|python_start|>"};
    for (int i = 0; i < 6; ++i) {
      t["added_tokens"].push_back({{"id", 257 + i}, {"content", names[i]}, {"special", true}, {"normalized", false}});
    }
  });
  const auto codec = make_text_codec(TokenizerKind::hf, path.parent_path().string());
  ASSERT_EQ(codec->vocab_size(), 263);
  const ChatFormat format(*codec, codec->vocab_size());
  EXPECT_TRUE(format.tokenizer_has_tokens());
  EXPECT_EQ(format.tokens().bos, 257);
  EXPECT_EQ(format.tokens().assistant_end, 261);
  EXPECT_EQ(format.ids_end(), 263);
  const std::vector<ChatMessage> chat{{ChatRole::user, "ab"}, {ChatRole::assistant, "<|user_start|>"}};
  const RenderedChat r = format.render_conversation(chat);
  EXPECT_EQ(r.ids.front(), 257);
  EXPECT_EQ(r.ids.back(), 261);
  EXPECT_EQ(std::count(r.ids.begin(), r.ids.end(), 258), 1);  // typed in a reply it stays text
  EXPECT_EQ(format.decode({257, 258, 256, 261}), "<|bos|><|user_start|>ab<|assistant_end|>");

  const auto half = tiny_tokenizer_json(dir, "half", [](nlohmann::json& t) {
    t["added_tokens"] = {{{"id", 257}, {"content", "<|bos|>"}, {"special", true}, {"normalized", false}}};
  });
  const auto half_codec = make_text_codec(TokenizerKind::hf, half.parent_path().string());
  EXPECT_NE(invalid_argument_message([&] { ChatFormat(*half_codec, 400); }).find("not <|user_start|>, <|user_end|>"),
            std::string::npos);
}

// "Is this GPT-2's tokenizer?" is a question: for any other tokenizer.json, alone (as `tokenizer train` writes
// it) or with vocab.json and merges.txt beside it (as exports have them), the answer is no. It threw GPT-2's
// reader's "tokenizer.json: expected 50257 tokens, found 263", and --sft refused every such tokenizer (issue 64).
TEST(HfBpeTokenizer, AnyTokenizerJsonButGpt2sIsNotGpt2sTokenizer) {
  ScratchDir dir;
  const auto path = tiny_tokenizer_json(dir, "own", [](nlohmann::json& t) {
    const char* names[] = {"<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
                           "<|python_start|>"};
    for (int i = 0; i < 6; ++i) {
      t["added_tokens"].push_back({{"id", 257 + i}, {"content", names[i]}, {"special", true}, {"normalized", false}});
    }
  });
  const std::string folder = path.parent_path().string();
  EXPECT_FALSE(is_gpt2_tokenizer_folder(folder));
  const auto json = nlohmann::json::parse(read_whole_file(path, "test tokenizer"));
  dir.write("own/vocab.json", json["model"]["vocab"].dump());
  dir.write("own/merges.txt", "#version: 0.2\na b\n");
  EXPECT_FALSE(is_gpt2_tokenizer_folder(folder));
  dir.write("own/vocab.json", "not JSON");  // files GPT-2's reader refuses are not GPT-2's either
  EXPECT_FALSE(is_gpt2_tokenizer_folder(folder));
  EXPECT_EQ(folder_tokenizer_kind(folder), TokenizerKind::hf);
  const auto codec = make_text_codec(TokenizerKind::hf, folder);
  EXPECT_TRUE(ChatFormat(*codec, codec->vocab_size()).tokenizer_has_tokens());
}

// The trainer's document delimiter: the folder's bos_token, else eos_token, else a known special token.
TEST(HfBpeTokenizer, AFolderIsTheHfKindAndItsConfigNamesTheDocumentDelimiter) {
  ScratchDir dir;
  const auto path = tiny_tokenizer_json(dir, "folder", [](nlohmann::json& t) {
    t["added_tokens"] = {{{"id", 257}, {"content", "<|bos|>"}, {"special", true}},
                         {{"id", 258}, {"content", "<|eos|>"}, {"special", true}}};
  });
  const std::string folder = path.parent_path().string();
  EXPECT_EQ(folder_tokenizer_kind(folder), TokenizerKind::hf);
  EXPECT_EQ(make_text_codec(TokenizerKind::hf, folder)->end_of_text(), 257);  // nanochat's <|bos|>
  dir.write("folder/tokenizer_config.json", R"({"bos_token": null, "eos_token": {"content": "<|eos|>"}})");
  const auto codec = make_text_codec(TokenizerKind::hf, folder);
  EXPECT_EQ(codec->end_of_text(), 258);
  EXPECT_EQ(codec->kind(), TokenizerKind::hf);
  EXPECT_EQ(codec->encode("ab<|eos|>"), (std::vector<int64_t>{256, 258}));
  EXPECT_EQ(parse_tokenizer_kind("hf"), TokenizerKind::hf);
}

// Without the Python reference: NFC composes before the BPE sees the text, a Sequence of NFC is NFC, and text
// that is not UTF-8 (which tokenizers cannot be given either) is one line naming the file.
TEST(HfBpeTokenizer, NfcNormalizerComposesAndRefusesTextThatIsNotUtf8) {
  ScratchDir dir;
  for (const auto change : {+[](nlohmann::json& t) {
                              t["normalizer"] = {{"type", "NFC"}};
                            },
                            +[](nlohmann::json& t) {
                              t["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
                            }}) {
    const auto path = tiny_tokenizer_json(dir, "nfc", change);
    const HfBpeTokenizer tokenizer = HfBpeTokenizer::load(path);
    EXPECT_EQ(tokenizer.encode("e\u0301ab"), tokenizer.encode("\u00e9ab"));
    EXPECT_EQ(tokenizer.decode(tokenizer.encode("e\u0301ab")), "\u00e9ab");
    EXPECT_EQ(tokenizer.decode(tokenizer.encode("\u1100\u1161\u11a8")), "\uac01");    // Hangul jamo compose
    EXPECT_EQ(tokenizer.decode(tokenizer.encode("\ufb01 \u212b")), "\ufb01 \u00c5");  // NFC keeps U+FB01
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(std::string("a\0b", 3))), std::string("a\0b", 3));
    for (const std::string bad : {"ab\xff", "\xc3", "a\xed\xa0\x80"}) {
      const std::string message = invalid_argument_message([&] { tokenizer.encode(bad); });
      EXPECT_NE(message.find(path.string() + ": its normalizer needs UTF-8 text"), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

// Without the Python reference: tokenizers' Unicode 9.0 tables, which know nothing of U+1DF6 (10.0, class
// 232) or of U+11935 U+11930 composing to U+11938 (13.0), while utf8proc does. The expected strings are
// tokenizers 0.23's NFC and NFKC; the reference comparison above draws from every Unicode version.
TEST(HfBpeTokenizer, NormalizesWithUnicode9TablesAsTokenizersDoes) {
  EXPECT_TRUE(assigned_in_unicode_9(U'a'));
  EXPECT_TRUE(assigned_in_unicode_9(U'\u1df5'));  // 7.0
  EXPECT_FALSE(assigned_in_unicode_9(U'\u1df6'));
  EXPECT_FALSE(assigned_in_unicode_9(U'\u0378'));  // never assigned
  EXPECT_TRUE(assigned_in_unicode_9(U'\U0010fffd'));  // private use
  EXPECT_FALSE(assigned_in_unicode_9(U'\U00011938'));
  for (const NormalForm form : {NormalForm::nfc, NormalForm::nfkc}) {
    EXPECT_EQ(normalized_as_tokenizers("a\u1df6\u0316", form), "a\u1df6\u0316");  // utf8proc alone reorders
    EXPECT_EQ(normalized_as_tokenizers("e\u1df6\u0301", form), "e\u1df6\u0301");  // and composes across it
    EXPECT_EQ(normalized_as_tokenizers("e\u0301\u1df6 a\u0301\u0316", form), "\u00e9\u1df6 \u00e1\u0316");
    EXPECT_EQ(normalized_as_tokenizers("\U00011935\U00011930", form), "\U00011935\U00011930");
    EXPECT_EQ(normalized_as_tokenizers(std::string("\u1df6e\0\u0301", 7), form), std::string("\u1df6e\0\u0301", 7));
  }
  EXPECT_EQ(normalized_as_tokenizers("\ufb01\u1df6\ufb01", NormalForm::nfkc), "fi\u1df6fi");
  EXPECT_THROW(normalized_as_tokenizers("a\u1df6\xff", NormalForm::nfc), std::invalid_argument);
}

// A split pattern as Oniguruma (tokenizers' engine, Unicode 16) reads it, whatever the Unicode of the PCRE2
// linked: a CJK Extension H, Kawi or Nag Mundari letter (Unicode 15) is \p{L}, a Nag Mundari digit \p{N};
// \p{^L} is \P{L}; and \p without a brace is the letter p. (The reference comparisons above judge the
// same on random text; this needs no Python.)
TEST(HfBpeTokenizer, SplitPatternsHaveTokenizersUnicode) {
  const auto matches = [](const std::string& pattern, const std::string& text) {
    bpe::PretokenPattern compiled(bpe::pcre2_pattern_of(pattern), "test");
    std::vector<std::string> out;
    for (std::size_t at = 0; at < text.size();) {
      const auto found = compiled.next(text, at);
      if (!found || found->second == found->first) break;
      out.push_back(text.substr(found->first, found->second - found->first));
      at = found->second;
    }
    return out;
  };
  const std::string word = "ab\U00031350cd\U00011f04\U0001e4d0x";
  EXPECT_EQ(matches(R"(\p{L}+)", word + " " + word), (std::vector<std::string>{word, word}));
  EXPECT_EQ(matches(R"([\p{L}\p{N}]+)", "a\U0001e4f1b 7"), (std::vector<std::string>{"a\U0001e4f1b", "7"}));
  EXPECT_EQ(matches(R"(\P{L}+)", word + " ,"), (std::vector<std::string>{" ,"}));
  EXPECT_EQ(matches(R"(\p{^L}+)", word + " ,"), (std::vector<std::string>{" ,"}));
  EXPECT_EQ(matches(R"([^\s\p{L}]+)", word + "!?"), (std::vector<std::string>{"!?"}));
  EXPECT_EQ(matches(R"(\pL+)", "LL pLLL"), (std::vector<std::string>{"pLLL"}));
  EXPECT_EQ(matches(R"(\s+)", "a\u180e\u3000b"), (std::vector<std::string>{"\u3000"}));  // White_Space
}

TEST(HfBpeTokenizer, RefusesWhatItDoesNotReadInOneLineNamingTheFile) {
  ScratchDir dir;
  const std::vector<std::pair<void (*)(nlohmann::json&), std::string>> cases = {
      {[](nlohmann::json& t) { t["model"]["type"] = "WordPiece"; }, "model type WordPiece is not supported"},
      {[](nlohmann::json& t) {
         t["model"] = {{"type", "Unigram"}, {"vocab", nlohmann::json::array()}};
       },
       "model type Unigram is not supported"},
      {[](nlohmann::json& t) { t["model"]["type"] = "WordLevel"; }, "model type WordLevel is not supported"},
      {[](nlohmann::json& t) {
         t["normalizer"] = {{"type", "NFD"}};
       },
       "normalizer NFD is not supported"},
      {[](nlohmann::json& t) {
         t["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
       },
       "normalizer Lowercase is not supported"},
      {[](nlohmann::json& t) {
         t["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", true}};
       },
       "normalizer BertNormalizer is not supported"},
      {[](nlohmann::json& t) {
         t["normalizer"] = {{"type", "Sequence"}};
       },
       "normalizer Sequence without a \"normalizers\" list"},
      {[](nlohmann::json& t) {
         t["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       "pre_tokenizer Metaspace is not supported"},
      {[](nlohmann::json& t) {
         t["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "pre_tokenizer Whitespace is not supported"},
      {[](nlohmann::json& t) { t["pre_tokenizer"] = nullptr; }, "pre_tokenizer null is not byte-level"},
      {[](nlohmann::json& t) {
         t["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Digits"}}}}};
       },
       "pre_tokenizer Digits after ByteLevel is not supported"},
      {[](nlohmann::json& t) {
         t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
       },
       "tokenizer.json: pre_tokenizer Split: split pattern does not compile"},
      {[](nlohmann::json& t) {
         t["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder WordPiece is not supported"},
      {[](nlohmann::json& t) { t["model"]["byte_fallback"] = true; }, "byte_fallback is not supported"},
      {[](nlohmann::json& t) { t["model"]["merges"] = {"a c"}; }, "uses a token missing from the vocab"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto path = tiny_tokenizer_json(dir, "case" + std::to_string(i), cases[i].first);
    const std::string message = invalid_argument_message([&] { HfBpeTokenizer::load(path); });
    EXPECT_NE(message.find(path.string() + ": "), std::string::npos) << message;
    EXPECT_NE(message.find(cases[i].second), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  dir.write("broken/tokenizer.json", "{\"model\": ");
  EXPECT_NE(invalid_argument_message([&] {
              HfBpeTokenizer::load(dir.path() / "broken" / "tokenizer.json");
            }).find("malformed JSON"),
            std::string::npos);
}

}  // namespace
}  // namespace mygpt::hf_bpe_tokenizer_test
