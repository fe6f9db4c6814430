#pragma once
// Hugging Face folders of the family's newer members, as transformers 5.x reads and writes them:
// NanoChat (NanoChatForCausalLM, model_type "nanochat"), Llama (LlamaForCausalLM) and Qwen3
// (Qwen3ForCausalLM). One table per class maps its tensors onto ours (a fused q|k|v or gate|up matrix of
// ours is several of theirs); export and import both read it. Folders are read by model/hf/hf_folder.h's one
// reader, which hands this file's mapping config.json; GPT-2's mapping is model/hf/hf_gpt2's.
//
// NanoChat rotates by -theta where Llama rotates by +theta (nanochat's apply_rotary_emb, kept by
// transformers): its q and k rows map onto ours with each head's second half negated, which turns one
// rotation into the other and leaves every q.k product, and so the model's function, unchanged.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/gpt.h"
#include "model/hf/hf_folder.h"

namespace mygpt {

enum class HfFamily { nanochat, llama, qwen3 };
const char* hf_family_class(HfFamily family);  // "NanoChatForCausalLM", ...

// The transformers class whose function this config computes exactly, or nullopt with `why` (one
// phrase naming the first choice no class has) filled in.
std::optional<HfFamily> hf_family_of(const GptConfig& config, std::string* why = nullptr);

// The special tokens config.json names: bos_token_id, eos_token_id, pad_token_id, each an id or a list of
// ids (Llama 3's eos), or null (unset).
struct HfSpecialTokenIds {
  nlohmann::json bos, eos, pad;
};

// Those of the model folder at `folder` (its config.json), where it has one: values that are no id of
// the first vocab_size rows stay unset. The tokenizer that an exported model carries comes from such a
// folder, and transformers' generate() stops at the eos its config names.
HfSpecialTokenIds hf_special_token_ids(const std::filesystem::path& folder, int64_t vocab_size);

// Writes `folder` (created if missing) as transformers' from_pretrained reads it: config.json (bos, eos
// and pad as given; the tokenizer is not written here) and model.safetensors in fp32 with the first
// vocab_size rows of the embedding and head. Each file atomically, config.json last. A config no class
// computes, or a vocab_size outside 1..config.vocab_size, is std::invalid_argument.
void export_hf_family(const Gpt& model, int64_t vocab_size, const std::filesystem::path& folder,
                      const HfSpecialTokenIds& special = {});

}  // namespace mygpt
