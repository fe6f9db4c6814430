#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include "eval/hellaswag_reader.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"

namespace mygpt::hellaswag_reader_test {
namespace {

namespace fs = std::filesystem;

// One file in a scratch folder of its own, rewritten by each write().
class TempFile {
 public:
  explicit TempFile(std::string name) : name_(std::move(name)) {}
  fs::path write(const std::string& text) const { return dir_.write(name_, text); }

 private:
  ScratchDir dir_;
  std::string name_;
};

// Reading must fail with std::invalid_argument whose one-line message holds every fragment.
void expect_read_error(const fs::path& path, std::initializer_list<std::string_view> fragments) {
  try {
    read_hellaswag(path);
    ADD_FAILURE() << "read_hellaswag accepted a bad file";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const std::string_view fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

// Two tasks in the shape of rowanz/hellaswag's hellaswag_val.jsonl (fields the reader ignores included).
const std::string kJsonl =
    R"({"ind": 24, "activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.", "ctx_b": "he",)"
    R"( "ctx": "A man is sitting on a roof. he", "split": "val", "split_type": "indomain", "label": 3,)"
    R"( "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.",)"
    R"( "is holding a rubik's cube.", "starts pulling up roofing on a roof."], "source_id": "activitynet~v_-JhWjGDPHMY"})"
    "\n"
    R"({"ctx": "A lady walks to a barbell. She bends down and grabs the pole. the lady", "label": 0,)"
    R"( "endings": ["swings and lands in her arms.", "pulls the barbell forward.", "pulls a rope.", "stands."]})"
    "\n";

TEST(HellaSwagReader, ReadsOfficialJsonl) {
  const TempFile file("hellaswag_val.jsonl");
  const auto examples = read_hellaswag(file.write(kJsonl));
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].context, "A man is sitting on a roof. he");
  EXPECT_EQ(examples[0].label, 3);
  EXPECT_EQ(examples[0].endings[0], "is using wrap to wrap a pair of skis.");
  EXPECT_EQ(examples[0].endings[3], "starts pulling up roofing on a roof.");
  EXPECT_EQ(examples[1].label, 0);
  EXPECT_EQ(examples[1].endings[2], "pulls a rope.");
}

TEST(HellaSwagReader, ReadsLlamaCppSixLineText) {
  const TempFile file("hellaswag_val_full.txt");
  const auto examples = read_hellaswag(file.write(
      "Roof shingle removal: A man is sitting on a roof. he\n3\nis using wrap to wrap a pair of skis.\n"
      "is ripping level tiles off.\nis holding a rubik's cube.\nstarts pulling up roofing on a roof.\n"
      "Clean and jerk: A lady walks to a barbell. the lady\r\n0\r\nswings.\r\npulls.\r\nlifts.\r\nstands.\r\n"));
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].context, "Roof shingle removal: A man is sitting on a roof. he");
  EXPECT_EQ(examples[0].label, 3);
  EXPECT_EQ(examples[0].endings[1], "is ripping level tiles off.");
  EXPECT_EQ(examples[1].context, "Clean and jerk: A lady walks to a barbell. the lady");  // CRLF is tolerated
  EXPECT_EQ(examples[1].label, 0);
  EXPECT_EQ(examples[1].endings[3], "stands.");
}

TEST(HellaSwagReader, RejectsBadFiles) {
  const TempFile file("bad.txt");
  expect_read_error(file.write(""), {"bad.txt", "empty"});
  expect_read_error(file.write(" \n\n"), {"bad.txt", "empty"});
  expect_read_error(file.write("ctx\n4\na\nb\nc\nd\n"), {"bad.txt:2:", "label must be 0, 1, 2 or 3"});
  expect_read_error(file.write("ctx\nx\na\nb\nc\nd\n"), {"bad.txt:2:", "label"});
  expect_read_error(file.write("ctx\n1\na\nb\nc\nd\nctx2\n"), {"bad.txt:7:", "not a multiple of 6"});
  expect_read_error(file.write("ctx\n1\na\nb\nc\n"), {"bad.txt:5:", "not a multiple of 6"});

  const std::string no_endings = R"({"ctx": "c", "label": 1})";
  expect_read_error(file.write(kJsonl + no_endings + "\n"), {"bad.txt:3:", "'endings'"});
  expect_read_error(file.write(R"({"endings": ["a", "b", "c", "d"], "label": 1})"), {"bad.txt:1:", "'ctx'"});
  expect_read_error(file.write(R"({"ctx": "c", "endings": ["a", "b", "c"], "label": 1})"), {"bad.txt:1:", "'endings'"});
  expect_read_error(file.write(R"({"ctx": "c", "endings": ["a", "b", "c", "d"]})"), {"bad.txt:1:", "'label'"});
  expect_read_error(file.write(R"({"ctx": "c", "endings": ["a", "b", "c", "d"], "label": 4})"),
                    {"bad.txt:1:", "label"});
  expect_read_error(file.write(kJsonl + "\n" + R"({"ctx": "c", "label": )"), {"bad.txt:4:", "malformed JSON"});
  // Found by fuzzing: a number beyond every type is nlohmann's out_of_range, not a parse error.
  expect_read_error(file.write(R"({"ctx": "c", "endings": ["a", "b", "c", "d"], "label": 888882e88000703943})"),
                    {"bad.txt:1:", "malformed JSON"});
  // An empty ending would be scored on no tokens at all (issue 19): refused, in both formats.
  expect_read_error(file.write(R"({"ctx": "c", "endings": ["a", "", "c", "d"], "label": 1})"),
                    {"bad.txt:1:", "ending 1", "empty"});
  expect_read_error(file.write(R"({"ctx": "c", "endings": ["a", "b", "c", "  "], "label": 1})"), {"ending 3", "empty"});
  expect_read_error(file.write("ctx\n1\na\nb\n\nd\n"), {"bad.txt:5:", "ending 2", "empty"});
  // Text that is not UTF-8 names the file and the byte offset (issue 19).
  expect_read_error(file.write("ctx\n1\na\nb\nc\xe9\nd\n"), {"bad.txt", "not UTF-8", "byte 0xE9 at byte offset 11"});
  expect_read_error(fs::temp_directory_path() / "mygpt_no_such_dir" / "missing.jsonl",
                    {"missing.jsonl", "does not exist"});
}

TEST(HellaSwagReader, ReadsTheSharedValidationFile) {
  const fs::path path = testing::kSharedData / "hellaswag" / "hellaswag_val_full.txt";
  if (!fs::exists(path)) GTEST_SKIP() << path.string() << " absent; see README";
  const auto examples = read_hellaswag(path);
  ASSERT_EQ(examples.size(), 10042u);
  EXPECT_EQ(examples.front().context, "Roof shingle removal: A man is sitting on a roof. he");
  EXPECT_EQ(examples.front().label, 3);
  EXPECT_EQ(examples.front().endings[3], "starts pulling up roofing on a roof.");
  std::array<int, 4> label_counts{};
  for (const HellaSwagExample& example : examples) ++label_counts[example.label];
  for (const int count : label_counts) EXPECT_GT(count, 2000);  // the val labels are near-uniform
}

}  // namespace
}  // namespace mygpt::hellaswag_reader_test
