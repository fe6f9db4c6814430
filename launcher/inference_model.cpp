#include "launcher/inference_model.h"

#include <algorithm>
#include <stdexcept>

#include "common/file_io.h"
#include "dataloader/chat_format.h"
#include "dataloader/hf_tokenizer_files.h"
#include "model/hf/hf_folder.h"
#include "model/huge_page_weights.h"
#include "trainer/stateful_parts.h"

namespace mygpt {
namespace fs = std::filesystem;
namespace {

constexpr const char* kCharVocabularyFile = "char_vocab.txt";

// The tokenizer files beside a Hugging Face model: its tokenizer.json, GPT-2's BPE files or our character
// vocabulary.
void read_folder_tokenizer(StoredModel& stored) {
  std::error_code ec;
  if (const auto kind = folder_tokenizer_kind(stored.path.string())) {
    stored.tokenizer_kind = *kind;
    stored.tokenizer_data = fs::absolute(stored.path).string();
  } else if (fs::exists(stored.path / kCharVocabularyFile, ec)) {
    stored.tokenizer_kind = TokenizerKind::character;
    stored.tokenizer_data = read_whole_file(stored.path / kCharVocabularyFile, "character vocabulary", 1 << 20);
  }
}

StoredModel open_hugging_face_folder(const fs::path& folder) {
  if (latest_checkpoint(folder)) {
    throw std::invalid_argument("folder '" + folder.string() +
                                "' holds both checkpoints (ckpt_*) and a Hugging Face config.json: name the "
                                "checkpoint file, or move one of them");
  }
  StoredModel stored;
  stored.path = folder;
  stored.hugging_face = true;
  stored.description = "Hugging Face folder " + folder.string();
  // The weights must be what config.json claims before anything of that size is built (train builds its
  // model before it copies the weights in): the folder is opened and checked once, here, and kept for the load.
  stored.hf_folder = open_hf_folder(folder, /*vocab_multiple=*/1);
  stored.config = stored.hf_folder->shape().config;
  stored.token_count = stored.hf_folder->shape().vocab_size;
  read_folder_tokenizer(stored);
  try {
    stored.chat_record = read_hf_chat_record(folder).value_or("");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("Hugging Face folder " + folder.string() + ": " + e.what());
  }
  return stored;
}

}  // namespace

StoredModel open_stored_model(const fs::path& path, CheckpointParts parts) {
  if (is_hf_model_folder(path)) return open_hugging_face_folder(path);
  StoredModel stored;
  stored.path = resolve_checkpoint(path);
  stored.checkpoint = load_checkpoint(stored.path, parts);
  const CheckpointMeta& meta = stored.checkpoint->meta;
  stored.description = "checkpoint " + stored.path.string() + " (step " + std::to_string(meta.step) + ")";
  stored.config = meta.model_config;
  stored.tokenizer_kind = meta.tokenizer_kind;
  stored.tokenizer_data = meta.tokenizer_data;
  stored.token_count = tokens_in_vocabulary(meta.tokenizer_kind, meta.model_config.vocab_size);
  stored.chat_record = meta.chat_format;
  if (!stored.chat_record.empty()) {
    // The chat tokens are outputs of a chat model like any other token: every loss and sample includes
    // their rows (as its export does, and transformers on it).
    try {
      stored.token_count = std::max(stored.token_count, ChatFormat::record_ids_end(stored.chat_record));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(stored.description + ": " + e.what());
    }
    if (stored.token_count > meta.model_config.vocab_size) {
      throw std::invalid_argument(stored.description + ": its chat tokens reach id " +
                                  std::to_string(stored.token_count - 1) + ", beyond its " +
                                  std::to_string(meta.model_config.vocab_size) + " vocabulary rows");
    }
  }
  return stored;
}

Gpt load_stored_weights(const StoredModel& stored, bool huge_pages) {
  // Every weight is overwritten below: no random initialization to draw first.
  Gpt model(stored.config, WeightInit::for_loading);
  if (huge_pages) static_cast<void>(place_weights_in_huge_pages(*model));
  copy_stored_weights(stored, model);
  return model;
}

void copy_stored_weights(const StoredModel& stored, Gpt& model) {
  if (stored.checkpoint) {
    ModelState(model).load_state_dict(part_state(stored.checkpoint->tensors, "model"));
  } else {
    // Straight from the mapped files into the parameters. A Hugging Face model's 50257 rows go into a model
    // padded to a multiple of 64 rows (fast matmuls) with the padding rows zero: their ids never occur as
    // targets, and samplers mask them.
    load_hf_weights(*stored.hf_folder, model);
  }
}

void for_each_stored_weight(const StoredModel& stored, const Gpt& model,
                            const std::function<void(const std::string&, const torch::Tensor&)>& take) {
  if (!stored.checkpoint) {
    for_each_hf_weight(*stored.hf_folder, model, take);
    return;
  }
  const StateDict state = part_state(stored.checkpoint->tensors, "model");
  const auto parameters = model->named_parameters();
  if (state.size() != parameters.size() + model->named_buffers().size()) {
    throw std::invalid_argument("model state holds tensors this model does not have");
  }
  for (const auto& item : parameters) {
    const auto it = state.find(item.key());
    if (it == state.end()) throw std::invalid_argument("model state lacks '" + item.key() + "'");
    if (!it->second.sizes().equals(item.value().sizes()) || it->second.scalar_type() != item.value().scalar_type()) {
      throw std::invalid_argument("model tensor '" + item.key() + "' has the wrong shape or type");
    }
    take(item.key(), it->second);
  }
}

std::unique_ptr<TextCodec> stored_model_codec(const StoredModel& stored, const std::string& vocab_dir) {
  std::unique_ptr<TextCodec> codec;
  if (!vocab_dir.empty() && stored.tokenizer_kind == TokenizerKind::character) {
    // Its ids are characters: GPT-2's tokens would index rows that mean something else.
    throw std::invalid_argument("--vocab does not apply to " + stored.description +
                                ": it is a character-level model and its characters are its tokenizer");
  }
  if (!vocab_dir.empty()) {
    try {
      codec = make_text_codec(folder_tokenizer_kind(vocab_dir).value_or(TokenizerKind::gpt2), vocab_dir);
    } catch (const std::invalid_argument& e) {  // the flag's folder is the problem: name the flag
      throw std::invalid_argument("--vocab " + vocab_dir + ": " + e.what());
    }
  } else if (stored.tokenizer_kind == TokenizerKind::none) {
    throw std::invalid_argument(
        stored.description + (stored.hugging_face ? " has no tokenizer files (tokenizer.json, or vocab.json and merges.txt)"
                                                  : " was trained on token data without --vocab") +
        ": give --vocab DIR (GPT-2's encoder.json and vocab.bpe)");
  } else {
    codec = make_text_codec(stored.tokenizer_kind, stored.tokenizer_data);
  }
  if (codec->vocab_size() > stored.token_count) {
    throw std::invalid_argument(
        vocab_dir.empty() ? stored.description + " has " + std::to_string(stored.token_count) +
                                " tokens, fewer than its tokenizer's " + std::to_string(codec->vocab_size())
                          : "--vocab " + vocab_dir + ": its tokenizer has " + std::to_string(codec->vocab_size()) +
                                " tokens, more than the " + std::to_string(stored.token_count) + " of " +
                                stored.description + " (it is not the tokenizer the model was trained with)");
  }
  return codec;
}

InferenceModel load_inference_model(const std::string& path, const torch::Device& device, const std::string& vocab_dir,
                                    bool need_tokenizer, bool tokenizer_if_any) {
  const StoredModel stored = open_stored_model(path);
  InferenceModel result;
  result.description = stored.description;
  result.token_count = stored.token_count;
  const bool has_tokenizer = stored.tokenizer_kind != TokenizerKind::none || !vocab_dir.empty();
  if (need_tokenizer || (tokenizer_if_any && has_tokenizer)) result.codec = stored_model_codec(stored, vocab_dir);
  if (!stored.chat_record.empty()) result.chat_record = stored.chat_record;
  // On the CPU the weights are loaded straight into the huge-page memory they are read from while decoding.
  result.model = load_stored_weights(stored, /*huge_pages=*/device.is_cpu());
  result.model->to(device);
  result.model->eval();
  return result;
}

}  // namespace mygpt
