// `mygpt-ddp export`: a model as a Hugging Face GPT-2 folder that transformers' from_pretrained loads:
// config.json and model.safetensors (model/hf/hf_gpt2.h), plus GPT-2's tokenizer as transformers keeps
// it (vocab.json and merges.txt, the same bytes as OpenAI's encoder.json and vocab.bpe, with
// tokenizer_config.json and special_tokens_map.json, and the tokenizer.json transformers writes for it; a model
// fine-tuned on conversations adds its chat tokens and template to tokenizer_config.json instead, so that
// apply_chat_template gives our ids); a model with a tokenizer.json (an imported Llama/Qwen/nanochat folder)
// gets it and its tokenizer_config.json and special_tokens_map.json back as they were (a chat model's
// tokens and template added). A chat model's eos is <|assistant_end|>, in config.json and
// generation_config.json. An exported chat folder read back is a chat model again (inference_model.h). A character-level model has no Hugging Face
// tokenizer: its vocabulary goes to char_vocab.txt, which our own commands read back.
//
// The folder appears whole or not at all: it is written under a temporary name beside --out and
// renamed into place (an --out that is an empty folder already, perhaps a mount point, gets it inside,
// and the files move up, config.json last). Writing into a folder that already has files takes
// --overwrite: the new files are staged inside it too, and only once all are written do the old model
// files go (config.json first out, last in) and the new ones move up, so a failed export (a full disk)
// leaves the old model as it was, and a folder can be exported onto itself.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/file_io.h"
#include "common/folder_claim.h"
#include "common/strprintf.h"
#include "dataloader/chat_format.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "dataloader/hf_tokenizer_files.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "launcher/commands.h"
#include "launcher/inference_model.h"
#include "launcher/shared_flags.h"
#include "model/hf/hf_family.h"
#include "model/hf/hf_gpt2.h"

namespace mygpt {
namespace {
namespace fs = std::filesystem;

struct ExportFlags {
  std::optional<std::string> checkpoint;
  std::optional<std::string> out;
  std::optional<std::string> vocab;
  bool overwrite{};
};

const OptionTable<ExportFlags>& export_flag_table() {
  static const OptionTable<ExportFlags> table = [] {
    using X = ExportFlags;
    OptionTable<X> t;
    t.group("Export");
    model_flag(t, &X::checkpoint);
    t.add("out", &X::out, "folder to write the Hugging Face model to (created; must be empty unless --overwrite)")
        .required();
    vocab_flag(t, &X::vocab);
    t.add("overwrite", &X::overwrite,
          "write into a folder that has files, replacing those of a model folder (config.json, *.safetensors, "
          "tokenizer files) and leaving the rest")
        .init(false);
    return t;
  }();
  return table;
}

// The names a model folder consists of; --overwrite replaces these and nothing else.
bool is_model_folder_file(const fs::path& path) {
  static const std::set<std::string> names = {
      "config.json",          "model.safetensors", "model.safetensors.index.json", "generation_config.json",
      "vocab.json",           "merges.txt",        "tokenizer.json",               "tokenizer_config.json",
      "special_tokens_map.json", "encoder.json",   "vocab.bpe",                    "char_vocab.txt"};
  const std::string name = path.filename().string();
  const bool shard = name.rfind("model-", 0) == 0 && path.extension() == ".safetensors";
  return names.count(name) > 0 || shard;
}

bool is_empty_folder(const fs::path& folder) {
  std::error_code ec;
  return fs::is_directory(folder, ec) && fs::is_empty(folder, ec);
}

// The tokenizer.json transformers writes for GPT-2 (AutoTokenizer's fast tokenizer reads this file first).
void write_gpt2_tokenizer_json(const fs::path& folder, const Gpt2TokenizerFiles& from) {
  const Gpt2TokenizerTexts texts = read_gpt2_tokenizer_texts(from);
  write_file_atomically(folder / HfBpeTokenizer::kFileName, gpt2_tokenizer_json(texts.vocabulary, texts.merges));
}

// A tokenizer.json folder's tokenizer, copied as it is (it was read, so checked, before); a tokenizer_config.json
// is written where the source has none, for AutoTokenizer to pick the fast tokenizer class.
void copy_tokenizer_json(const fs::path& folder, const fs::path& from, int64_t context) {
  std::error_code ec;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
    if (fs::exists(from / name, ec)) {
      write_file_atomically(folder / name, read_whole_file(from / name, "Hugging Face tokenizer file"));
    }
  }
  if (!fs::exists(from / "tokenizer_config.json", ec)) {
    const nlohmann::ordered_json config = {{"model_max_length", context},
                                           {"tokenizer_class", "PreTrainedTokenizerFast"}};
    write_file_atomically(folder / "tokenizer_config.json", config.dump(2) + "\n");
  }
}

// transformers' generate() reads its defaults from here first: a chat model's reply ends at its eos.
void write_generation_config(const fs::path& folder, const HfSpecialTokenIds& special) {
  const nlohmann::ordered_json config = {{"bos_token_id", special.bos}, {"eos_token_id", special.eos}};
  write_file_atomically(folder / "generation_config.json", config.dump(2) + "\n");
}

// Removes a temporary export folder unless it was published.
class TemporaryFolder {
 public:
  // what: the option the folder is for ("--out"); a folder that cannot be made is bad input naming it.
  TemporaryFolder(fs::path path, const std::string& what) : path_(std::move(path)) {
    std::error_code ec;
    fs::create_directories(path_, ec);
    if (ec) {
      throw std::invalid_argument(what + ": cannot create a folder in " + path_.parent_path().string() + ": " +
                                  ec.message());
    }
  }
  ~TemporaryFolder() {
    std::error_code ignored;
    if (!published_) fs::remove_all(path_, ignored);
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const fs::path& path() const { return path_; }
  void publish_as(const fs::path& target) {
    if (path_.parent_path() == target) {
      // Staged inside the target: the model files it has (an --overwrite) go, config.json first, so that
      // until the new one is in it is no model folder; then the staged files move up, config.json last.
      std::vector<fs::path> replaced{target / "config.json"};
      for (const auto& entry : fs::directory_iterator(target)) {
        if (entry.is_regular_file() && is_model_folder_file(entry.path()) && entry.path().filename() != "config.json") {
          replaced.push_back(entry.path());
        }
      }
      publish_staged_files(path_, target, replaced, "config.json");
      published_ = true;
      return;
    }
    fs::rename(path_, target);  // replaces an empty folder
    published_ = true;
    sync_directory(fs::absolute(target).parent_path());
  }

 private:
  fs::path path_;
  bool published_ = false;
};

int run_export(const Parsed<ExportFlags>& flags, const JobSession&) {
  const ExportFlags& f = flags.config;
  const fs::path out = *f.out;
  if (out.empty()) throw std::invalid_argument("--out is empty: give the folder to write the Hugging Face model to");
  std::error_code ec;
  const bool out_exists = fs::exists(out, ec);
  if (out_exists && !fs::is_directory(out, ec)) {
    throw std::invalid_argument("--out '" + out.string() + "' is a file, not a folder");
  }
  const bool fresh = !out_exists || is_empty_folder(out);
  if (!fresh && !f.overwrite) {
    throw std::invalid_argument("--out '" + out.string() +
                                "' is not empty: choose a new folder, or give --overwrite to replace the model "
                                "files in it");
  }
  if (fresh) flags.refuse("overwrite", "with an --out that is empty or absent");
  // Replacing files in a folder is what a training run into it does too: the folder's claim (one run per
  // --out) keeps an export from deleting files under a live run and a run from starting under an export.
  std::optional<FolderClaim> claim;
  if (!fresh) claim.emplace(out, "--out");

  // The staging folder first: an --out that cannot be written is refused before the model is read.
  std::optional<TemporaryFolder> staging;
  fs::path folder = out, target = fs::absolute(out).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "dir/"
  const std::string what = "--out '" + out.string() + "'";
  if (out_exists) {
    // A folder with files (--overwrite) keeps them until the new model is whole; an empty one may be a
    // mount point (a container's volume), which no rename can replace. Either way the model is staged
    // inside it, on its filesystem, and its files move up when whole.
    staging.emplace(target / strprintf(".export.%d", static_cast<int>(::getpid())), what);
    folder = staging->path();
  } else {
    create_output_directory(target.parent_path(), "--out's parent folder");
    const std::string hidden = strprintf(".%s.export.%d", target.filename().c_str(), static_cast<int>(::getpid()));
    staging.emplace(target.parent_path() / hidden, what);
    folder = staging->path();
  }

  const StoredModel stored = open_stored_model(*f.checkpoint);
  std::cout << "model: " << stored.description << std::endl;
  // What the folder's vocabulary is: GPT-2's 50257 tokens, the characters, or (no tokenizer) every row.
  std::optional<Gpt2TokenizerFiles> bpe;
  std::optional<fs::path> tokenizer_json;
  int64_t vocab_size = stored.config.vocab_size;
  const bool characters = stored.tokenizer_kind == TokenizerKind::character;
  std::unique_ptr<TextCodec> codec;
  if (f.vocab || stored.tokenizer_kind != TokenizerKind::none) {
    codec = stored_model_codec(stored, f.vocab.value_or(""));  // reads (so checks) the files
    const std::string dir = f.vocab.value_or(stored.tokenizer_data);
    if (codec->kind() == TokenizerKind::hf) {
      // Its model keeps every row it has: such tokenizers' vocabularies are rarely the embedding's size.
      vocab_size = stored.token_count;
      tokenizer_json = dir;
    } else {
      vocab_size = codec->vocab_size();
      if (!characters) bpe = Gpt2BpeTokenizer::find_files(dir);
    }
  }
  // A fine-tuned chat model (a checkpoint's record, or an exported folder's template read back) keeps the
  // rows of its chat tokens too (GPT-2: 50262 of its 50304), its template and its tokens.
  std::optional<ChatFormat> chat;
  if (!stored.chat_record.empty() && (bpe || tokenizer_json)) {
    try {
      chat.emplace(*codec, stored.config.vocab_size);
      chat->check_record(stored.chat_record);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--checkpoint " + stored.path.string() + ": " + e.what());
    }
    vocab_size = std::max(vocab_size, chat->ids_end());
  }
  const Gpt model = load_stored_weights(stored);

  if (bpe) {
    write_hf_gpt2_tokenizer(folder, *bpe, stored.config.block_size, chat ? &*chat : nullptr);
    // A chat model's five tokens are added tokens of tokenizer_config.json (apply_chat_template is tested
    // on that folder); a tokenizer.json without them would take precedence, so only a plain model gets one.
    if (!chat) write_gpt2_tokenizer_json(folder, *bpe);
  }
  if (tokenizer_json) {
    copy_tokenizer_json(folder, *tokenizer_json, stored.config.block_size);
    if (chat) add_chat_to_hf_tokenizer(folder, *chat);
  }
  if (characters) write_file_atomically(folder / "char_vocab.txt", stored.tokenizer_data);
  // A tokenizer.json came from a model folder (the imported one, or the one a run was initialized from):
  // its bos, eos and pad ids come along. A chat model's end is <|assistant_end|>: transformers' generate()
  // stops where `chat` does.
  HfSpecialTokenIds special = tokenizer_json ? hf_special_token_ids(*tokenizer_json, vocab_size) : HfSpecialTokenIds{};
  if (chat) {
    special.bos = chat->tokens().bos;
    special.eos = chat->tokens().assistant_end;
  }
  if (chat) write_generation_config(folder, special);
  // GPT-2's architecture as GPT2LMHeadModel; the newer members as the transformers class that computes them.
  if (model->config().is_gpt2_architecture()) {
    export_hf_gpt2(model, vocab_size, folder, special);  // config.json last
  } else {
    export_hf_family(model, vocab_size, folder, special);
  }
  staging->publish_as(target);

  std::cout << "exported to " << out.string() << ": config.json, model.safetensors (" << vocab_size << " tokens)"
            << (bpe ? ", vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json" : "")
            << (bpe && !chat ? ", tokenizer.json" : "")
            << (chat ? ", generation_config.json (with the chat template and its 5 special tokens; generation ends at "
                       "<|assistant_end|>)"
                     : "")
            << (tokenizer_json ? ", tokenizer.json, tokenizer_config.json" : "") << std::endl;
  if (characters) {
    std::cout << "note: a character-level model has no Hugging Face tokenizer; its characters are in char_vocab.txt "
                 "(id order), which mygpt-ddp reads back"
              << std::endl;
  } else if (!bpe && !tokenizer_json) {
    std::cout << "note: the model records no tokenizer, so the folder has none and keeps all " << vocab_size
              << " rows (transformers loads the weights but cannot tokenize text): give --vocab DIR if it reads GPT-2 "
                 "tokens, for GPT-2's tokenizer files and its 50257 rows"
              << std::endl;
  }
  return 0;
}

}  // namespace

Command export_command() {
  return make_command<ExportFlags>("export", "export --checkpoint PATH --out DIR [options]",
                                   "write a model as a Hugging Face folder (GPT-2, NanoChat, Llama, Qwen3)",
                                   /*multi_rank=*/false, &export_flag_table, &run_export);
}

}  // namespace mygpt
