// Reading tokenizer.json into an HfBpeTokenizer: the BPE model, the normalizer, the pre-tokenizer's steps
// and the added tokens, each checked, every problem refused in one line naming the file.
#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "common/file_io.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/hf_bpe_tokenizer_impl.h"

namespace mygpt {
namespace {

using hf_bpe::AddedToken;
using hf_bpe::PretokenStep;
using hf_bpe::SplitBehavior;
using hf_bpe::StepAtCut;
using nlohmann::json;

std::string escaped_literal(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';
    out += c;
  }
  return out;
}

std::string type_of(const json& node) {
  if (node.is_null()) return "null";
  if (!node.is_object()) return node.dump().substr(0, 40);
  const auto type = node.find("type");
  return type != node.end() && type->is_string() ? type->get<std::string>() : "(no type)";
}

bool flag(const json& node, const char* key, bool fallback) {
  const auto it = node.find(key);
  return it != node.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

void HfBpeTokenizer::Impl::read_normalizer(const json& node) {
  const std::string type = type_of(node);
  if (node.is_null()) return;
  if (type == "Sequence") {
    const json& inner = node.value("normalizers", json());
    if (!inner.is_array()) refuse("normalizer Sequence without a \"normalizers\" list");
    for (const json& each : inner) read_normalizer(each);
    return;
  }
  if (type == "NFC") {
    normalizer.push_back(NormalForm::nfc);
  } else if (type == "NFKC") {
    normalizer.push_back(NormalForm::nfkc);
  } else {
    refuse("normalizer " + type + " is not supported (NFC, NFKC and a Sequence of them are)");
  }
}

void HfBpeTokenizer::Impl::read_pretokenizer(const json& node, bool& byte_level_seen) {
  const std::string type = type_of(node);
  if (byte_level_seen)
    refuse("pre_tokenizer " + type + " after ByteLevel is not supported (it would see byte-level characters)");
  if (type == "Sequence" && node.contains("pretokenizers") && node["pretokenizers"].is_array()) {
    for (const auto& inner : node["pretokenizers"]) read_pretokenizer(inner, byte_level_seen);
    return;
  }
  if (type == "ByteLevel") {
    byte_level_seen = true;
    if (flag(node, "add_prefix_space", false)) {
      steps.push_back(PretokenStep{});
      steps.back().at_cut = StepAtCut::prefix_space;
    }
    if (flag(node, "use_regex", true)) {
      steps.push_back(PretokenStep{bpe::PretokenPattern(bpe::gpt2_split_pattern(), where)});
      steps.back().at_cut = StepAtCut::splits_there;
    }
    return;
  }
  if (type == "Digits") {
    const bool individual = flag(node, "individual_digits", false);
    steps.push_back(PretokenStep{bpe::PretokenPattern(bpe::pcre2_pattern_of(R"(\p{N})"), where),
                                 individual ? SplitBehavior::isolated : SplitBehavior::contiguous});
    steps.back().at_cut = StepAtCut::digits;
    return;
  }
  if (type != "Split") refuse("pre_tokenizer " + type + " is not supported (ByteLevel, Split, Digits, Sequence are)");
  const json& pattern = node.value("pattern", json());
  std::string regex;
  std::optional<CrlfCut> crlf;  // the pattern is proven to restart at line cuts
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = bpe::pcre2_pattern_of(pattern["Regex"].get<std::string>());
    crlf = proven_line_pattern(pattern["Regex"].get<std::string>());
  } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    regex = escaped_literal(pattern["String"].get<std::string>());
  } else {
    refuse("Split pre_tokenizer without a \"Regex\" or \"String\" pattern");
  }
  static const std::map<std::string, SplitBehavior> behaviors = {
      {"Removed", SplitBehavior::removed},
      {"Isolated", SplitBehavior::isolated},
      {"MergedWithPrevious", SplitBehavior::merged_with_previous},
      {"MergedWithNext", SplitBehavior::merged_with_next},
      {"Contiguous", SplitBehavior::contiguous}};
  const auto behavior = behaviors.find(node.value("behavior", std::string("(none)")));
  if (behavior == behaviors.end())
    refuse("Split pre_tokenizer with an unknown behavior " + node.value("behavior", json()).dump());
  steps.push_back(PretokenStep{bpe::PretokenPattern(regex, where + "pre_tokenizer Split"), behavior->second,
                               flag(node, "invert", false)});
  if (crlf && behavior->second == SplitBehavior::isolated && !steps.back().invert) {
    steps.back().at_cut = StepAtCut::splits_there;
    steps.back().crlf = *crlf;
  }
}

void HfBpeTokenizer::Impl::read_model(const json& model, const json& added) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json value = model.value(key, json());
    if (!value.is_null() && value != "") refuse(std::string("BPE ") + key + " " + value.dump() + " is not supported");
  }
  const json dropout = model.value("dropout", json());
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0))
    refuse("BPE dropout is not supported");
  if (flag(model, "byte_fallback", false)) refuse("BPE byte_fallback is not supported (it is not byte-level BPE)");
  ignore_merges = flag(model, "ignore_merges", false);

  const json& vocab = model.value("vocab", json());
  const json& merges = model.value("merges", json());
  if (!vocab.is_object() || !merges.is_array()) refuse("the BPE model needs a \"vocab\" object and a \"merges\" list");
  // tokenizers loads an empty vocab and tokenizes every text to nothing; prepare then failed with "all 0 tokens
  // went to validation", naming neither the file nor the cause.
  if (vocab.empty()) refuse("the BPE model's vocab is empty (every text would tokenize to nothing)");
  const auto place = [&](int64_t id, const std::string& spelling, const std::string& what) {
    if (id < 0 || id >= (int64_t{1} << 31) - 1)
      refuse(what + " " + json(spelling).dump() + " has id " + std::to_string(id));
    if (static_cast<std::size_t>(id) >= token_bytes.size()) {
      token_bytes.resize(id + 1);
      has_id.resize(id + 1);
    }
    // tokenizers' ByteLevel decoder: a token all in the byte alphabet is those bytes, any other its UTF-8.
    token_bytes[id] = bpe::bytes_of_alphabet_spelling(spelling).value_or(spelling);
    has_id[id] = true;
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) refuse("vocab token " + json(it.key()).dump() + " has no integer id");
    const auto id = it.value().get<int64_t>();
    place(id, it.key(), "vocab token");
    id_of_spelling.emplace(it.key(), static_cast<int32_t>(id));
    if (const auto bytes = bpe::bytes_of_alphabet_spelling(it.key()))
      id_of_bytes.emplace(*bytes, static_cast<int32_t>(id));
  }

  std::array<int32_t, 256> byte_token{};
  const json unk = model.value("unk_token", json());
  const auto unk_id = unk.is_string() ? id_of_spelling.find(unk.get<std::string>()) : id_of_spelling.end();
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = id_of_spelling.find(bpe::alphabet_spelling_of_byte(static_cast<unsigned char>(byte)));
    // A byte outside the vocabulary is the unknown token, or (without one) dropped, as tokenizers does.
    byte_token[byte] = it != id_of_spelling.end() ? it->second : unk_id != id_of_spelling.end() ? unk_id->second : -1;
    if (it == id_of_spelling.end() && unk_id != id_of_spelling.end() && flag(model, "fuse_unk", false)) {
      refuse("BPE fuse_unk with bytes missing from the vocabulary is not supported");
    }
  }

  bpe::MergeTable table(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {
      const std::string line = merge.get<std::string>();
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        refuse("merge " + merge.dump() + " is not two tokens separated by one space");
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      refuse("a merge is neither \"a b\" nor [a, b]: " + merge.dump().substr(0, 80));
    }
    const auto l = id_of_spelling.find(left), r = id_of_spelling.find(right), m = id_of_spelling.find(left + right);
    if (l == id_of_spelling.end() || r == id_of_spelling.end() || m == id_of_spelling.end()) {
      refuse("merge " + merge.dump() + " uses a token missing from the vocab");
    }
    table.assign(l->second, r->second, bpe::MergeRule{static_cast<int32_t>(rank), m->second});
  }
  words.emplace(byte_token, std::move(table), bpe::MergeOrder::one_at_a_time);

  if (!added.is_null() && !added.is_array()) refuse("\"added_tokens\" is not a list");
  for (const json& token : added.is_array() ? added : json::array()) {
    if (!token.is_object() || !token.value("id", json()).is_number_integer() ||
        !token.value("content", json()).is_string()) {
      refuse("an added token without an integer \"id\" and a \"content\" string: " + token.dump().substr(0, 80));
    }
    AddedToken a{token["content"].get<std::string>(), 0, flag(token, "single_word", false),
                 flag(token, "lstrip", false), flag(token, "rstrip", false), flag(token, "special", false)};
    const auto id = token["id"].get<int64_t>();
    if (a.content.empty()) continue;  // tokenizers ignores them too
    const auto known = id_of_spelling.find(a.content);
    if (known != id_of_spelling.end() && known->second != id) {
      refuse("added token " + json(a.content).dump() + " has id " + std::to_string(id) + " but the vocab gives it " +
             std::to_string(known->second));
    }
    if (known == id_of_spelling.end() && static_cast<std::size_t>(std::max<int64_t>(id, 0)) < has_id.size() &&
        has_id[id]) {
      refuse("added token " + json(a.content).dump() + " takes id " + std::to_string(id) + ", which another token has");
    }
    // Specials are matched before the normalizer and the rest after it, as tokenizers does; those matched
    // after it are matched by their normalized content, which is also what tokenizers (0.23) decodes them
    // to (AddedVocabulary's normalized_cache).
    const bool after_normalizer = flag(token, "normalized", !flag(token, "special", false));
    const std::string matched = after_normalizer ? normalized(a.content) : a.content;
    place(id, matched, "added token");
    a.id = static_cast<int32_t>(id);
    id_of_spelling.insert_or_assign(a.content, a.id);
    a.content = matched;
    (after_normalizer ? normalized_added : raw_added).push_back(std::move(a));
    if (token.value("single_word", false) && !word_character) {
      // Rust regex's Unicode \w (Unicode 16). Alphabetic is the letters, Nl and marks (mostly): naming
      // \p{L} and \p{Nl} too changes nothing in PCRE2 but brings in the letters its older Unicode lacks.
      word_character.emplace(
          bpe::pcre2_pattern_of(R"(\A[\p{Alphabetic}\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])"), where);
    }
  }
  // Leftmost-longest: at each position the longest token wins, so try them longest first.
  for (auto* list : {&raw_added, &normalized_added}) {
    std::stable_sort(list->begin(), list->end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  }
}

HfBpeTokenizer HfBpeTokenizer::load(const std::filesystem::path& tokenizer_json) {
  auto impl = std::make_unique<Impl>();
  impl->where = tokenizer_json.string() + ": ";
  json root;
  try {
    root = json::parse(read_whole_file(tokenizer_json, "Hugging Face tokenizer file"));
  } catch (const json::exception& e) {
    impl->refuse(std::string("malformed JSON: ") + e.what());
  }
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) impl->refuse("no \"model\" object");
  const std::string model_type = type_of(root["model"]);
  if (model_type != "BPE") impl->refuse("model type " + model_type + " is not supported (only byte-level BPE is)");
  impl->read_normalizer(root.value("normalizer", json()));
  bool byte_level = false;
  const json pretokenizer = root.value("pre_tokenizer", json());
  if (!pretokenizer.is_null()) impl->read_pretokenizer(pretokenizer, byte_level);
  if (!byte_level) impl->refuse("pre_tokenizer " + type_of(pretokenizer) + " is not byte-level (no ByteLevel in it)");
  const json decoder = root.value("decoder", json());
  const bool byte_level_decoder = type_of(decoder) == "ByteLevel" ||
                                  (type_of(decoder) == "Sequence" && decoder.value("decoders", json()).is_array() &&
                                   decoder["decoders"].size() == 1 && type_of(decoder["decoders"][0]) == "ByteLevel");
  if (!byte_level_decoder) impl->refuse("decoder " + type_of(decoder) + " is not supported (only ByteLevel is)");
  impl->read_model(root["model"], root.value("added_tokens", json()));
  impl->decide_cuts();
  for (const auto* list : {&impl->raw_added, &impl->normalized_added}) {
    for (const AddedToken& token : *list) impl->longest_added = std::max(impl->longest_added, token.content.size());
  }
  return HfBpeTokenizer(std::move(impl));
}

}  // namespace mygpt
