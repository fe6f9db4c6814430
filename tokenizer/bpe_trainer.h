#pragma once
// Trains a byte-level BPE tokenizer with exactly rustbpe's merges (nanochat's tok_train): documents are
// cut to --doc-cap characters, taken until the characters passed --max-chars (the document that passes
// it is the last), split by a regex into chunks that are counted (tokenizer/chunk_counter.h), and the
// merges are learned from the counts (tokenizer/bpe_merger.h). Ids: the 256 bytes, the merges in order,
// then the special tokens, as nanochat numbers them. The result is written as tokenizer.json (the layout
// HfBpeTokenizer reads) and tokenizer_config.json.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/bpe_merger.h"
#include "tokenizer/chunk_counter.h"

namespace mygpt {

// The split patterns by name (gpt4: GPT-4's cl100k, rustbpe's default; gpt2; nanochat: GPT-4's with
// \p{N}{1,2}), as written for Oniguruma and fancy-regex; nullopt for another name.
std::optional<std::string> named_split_pattern(std::string_view name);
// nanochat's special tokens in its order (<|bos|> first), which `--special nanochat` stands for.
const std::vector<std::string>& nanochat_special_tokens();

// Whether a special token is marked off as text never is: <...> or [...] (GPT-2's <|endoftext|>, nanochat's
// <|bos|>, BERT's [CLS]), without whitespace. Hugging Face's tokenizers match special tokens in the text
// before anything else, so a special "the" would take every "the" out of every document.
bool has_special_form(std::string_view token);

struct BpeTrainingOptions {
  std::string split_regex;  // as written for Oniguruma (tokenizer.json keeps it so)
  std::size_t vocab_size = 0;  // the special tokens included, as nanochat counts
  std::vector<std::string> special_tokens;
  std::optional<uint64_t> doc_cap;    // characters (code points) per document
  std::optional<uint64_t> max_chars;  // characters in all
  int threads = 1;
};

struct TrainedBpe {
  std::vector<std::string> token_bytes;  // the bytes of each id: 0..255, then one per merge
  std::vector<bpe::LearnedMerge> merges;
  std::string split_regex;
  std::vector<std::string> special_tokens;
  uint64_t characters = 0, documents = 0, distinct_chunks = 0;

  std::string tokenizer_json() const;
  // bos_token: the first special token; eos_token: <|endoftext|> where there is one, else nanochat's
  // <|assistant_end|>, else the first special token.
  std::string tokenizer_config_json() const;
};

class BpeTrainer {
 public:
  // Bad options (a vocabulary smaller than 256 + the special tokens, a special token given twice, empty
  // or not of special form, a regex that does not compile) throw std::invalid_argument naming the option.
  explicit BpeTrainer(BpeTrainingOptions options);
  ~BpeTrainer();

  // A piece of UTF-8 text; starts_document when it is the first piece of a document (pieces of one
  // document are split on their own: the caller cuts only where the pattern's chunks end anyway).
  // Returns false once the character budget is spent: the caller may stop reading.
  bool add(std::string_view piece, bool starts_document);
  uint64_t characters() const { return characters_; }

  // Counts the last pieces and learns the merges; `progress(done, total)` during the merges. Throws
  // std::invalid_argument when no text came in.
  TrainedBpe finish(const std::function<void(std::size_t, std::size_t)>& progress = nullptr);

 private:
  BpeTrainingOptions options_;
  std::unique_ptr<bpe::ChunkCounter> counter_;
  uint64_t characters_ = 0, documents_ = 0, document_characters_ = 0;
  bool spent_ = false;
};

}  // namespace mygpt
