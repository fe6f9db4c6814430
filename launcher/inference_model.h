#pragma once
// Models stored on disk, in the one place that knows both kinds: our checkpoints (a file, or the newest
// in a folder) and Hugging Face folders (config.json + model.safetensors or its sharded index; GPT-2,
// NanoChat, Llama, Qwen3), which model/hf/hf_folder.h opens and checks once and then loads in one pass.
// generate, eval, export and train --init-from / --resume all open them here, so every command accepts
// both and reports the same way what it loaded.
//
// Hugging Face models are imported with their vocabulary as it is (50257 for GPT-2, not padded to
// 50304): every loss the program computes (training, validation, HellaSwag) then matches transformers'
// without masking padded ids, and samples cannot draw an id that is not a token.
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tokenizer/text_codec.h"
#include "model/gpt.h"
#include "model/hf/hf_folder.h"
#include "trainer/checkpoint.h"

namespace mygpt {

struct StoredModel {
  std::filesystem::path path;  // the checkpoint file or the Hugging Face folder
  bool hugging_face = false;
  std::string description;  // "checkpoint out/ckpt_00000100.safetensors (step 100)", "Hugging Face folder gpt2-hf"
  GptConfig config;         // the stored shape; config.vocab_size is the embedding's rows
  int64_t token_count = 0;  // ids below this are tokens; the rows above are vocabulary padding
  TokenizerKind tokenizer_kind = TokenizerKind::none;
  std::string tokenizer_data;            // what make_text_codec rebuilds the tokenizer from
  // A chat model's format (ChatFormat::record(), dataloader/chat_format.h): a checkpoint's, or read back
  // from an exported folder's tokenizer_config.json; empty for a model that never saw conversations.
  // Its chat tokens' rows count as tokens (token_count).
  std::string chat_record;
  std::optional<Checkpoint> checkpoint;  // the whole file, for our checkpoints
  std::optional<HfFolder> hf_folder;     // the opened, checked folder, for Hugging Face models
};

// Reads one of our checkpoints whole, or a Hugging Face folder's config.json and tokenizer files
// (vocab.json + merges.txt or encoder.json + vocab.bpe: GPT-2's BPE; char_vocab.txt: characters, as
// `export` writes it for a character model; a chat model's template and tokens from tokenizer_config.json);
// the folder's weights are read by load_stored_weights.
// Anything unusable is std::invalid_argument naming the path. A checkpoint is read as `parts` says:
// whole to resume it, its weights alone for every other use.
StoredModel open_stored_model(const std::filesystem::path& path, CheckpointParts parts = CheckpointParts::weights);

// The stored model's weights in a new model on the CPU, built without a random initialization and
// filled in one pass (in huge-page memory with huge_pages: model/huge_page_weights.h).
Gpt load_stored_weights(const StoredModel& stored, bool huge_pages = false);
// Copies the stored weights into `model` (of the stored shape but for padded vocabulary rows, which are
// zeroed; on any device), leaving the random generators where they were.
void copy_stored_weights(const StoredModel& stored, Gpt& model);
// The same values one parameter at a time (--zero 3, where a rank keeps a part of each): take(name, value)
// in the model's parameter order, value a CPU tensor (from a checkpoint: a view of its mapped file) that
// lives until take returns. `model` gives the names and shapes only; a shape the file does not have is
// std::invalid_argument, as copy_stored_weights'.
void for_each_stored_weight(const StoredModel& stored, const Gpt& model,
                            const std::function<void(const std::string&, const torch::Tensor&)>& take);

// stored's tokenizer, or GPT-2's from vocab_dir when that is not empty (for models trained on token
// data without --vocab, or whose files moved). Throws std::invalid_argument when there is none, or
// when the tokenizer has ids the model lacks.
std::unique_ptr<TextCodec> stored_model_codec(const StoredModel& stored, const std::string& vocab_dir);

// A stored model ready for sampling or evaluation, in eval mode on a device.
struct InferenceModel {
  Gpt model{nullptr};
  std::string description;  // what was loaded (StoredModel::description)
  int64_t token_count = 0;           // samples draw only ids below this (SamplingOptions::vocab_limit)
  std::unique_ptr<TextCodec> codec;  // null unless need_tokenizer
  // The chat format a model was fine-tuned on (ChatFormat::record(), dataloader/chat_format.h); none for
  // a model that never saw conversations.
  std::optional<std::string> chat_record;
};

// vocab_dir as for stored_model_codec. Without need_tokenizer no tokenizer is loaded (token data needs
// none, and a model trained on it may have none), unless tokenizer_if_any and the model (or vocab_dir) has
// one (bits per byte of token data counts its tokens' bytes).
InferenceModel load_inference_model(const std::string& path, const torch::Device& device,
                                    const std::string& vocab_dir = "", bool need_tokenizer = true,
                                    bool tokenizer_if_any = false);

}  // namespace mygpt
