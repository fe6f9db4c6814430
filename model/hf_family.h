#pragma once
// Hugging Face folders of the family's newer members, as transformers 5.x reads and writes them:
// NanoChat (NanoChatForCausalLM, model_type "nanochat"), Llama (LlamaForCausalLM) and Qwen3
// (Qwen3ForCausalLM). One table per class maps its tensors onto ours (a fused q|k|v or gate|up matrix of
// ours is several of theirs); export and import both read it. GPT-2's folders stay with model/hf_gpt2.h.
//
// NanoChat rotates by -theta where Llama rotates by +theta (nanochat's apply_rotary_emb, kept by
// transformers): its q and k rows map onto ours with each head's second half negated, which turns one
// rotation into the other and leaves every q.k product, and so the model's function, unchanged.
#include <filesystem>
#include <optional>
#include <string>

#include "model/gpt.h"
#include "model/hf_gpt2.h"

namespace mygpt {

enum class HfFamily { nanochat, llama, qwen3 };
const char* hf_family_class(HfFamily family);  // "NanoChatForCausalLM", ...

// The transformers class whose function this config computes exactly, or nullopt with `why` (one
// phrase naming the first choice no class has) filled in.
std::optional<HfFamily> hf_family_of(const GptConfig& config, std::string* why = nullptr);

// Whether folder/config.json names one of these classes' model_type (nanochat, llama, qwen3); false for
// GPT-2's folders and for folders without a readable config.json.
bool is_hf_family_folder(const std::filesystem::path& folder);

// Writes `folder` (created if missing) as transformers' from_pretrained reads it: config.json (bos, eos
// and pad unset: the tokenizer is not written here) and model.safetensors in fp32 with the first
// vocab_size rows of the embedding and head. Each file atomically, config.json last. A config no class
// computes, or a vocab_size outside 1..config.vocab_size, is std::invalid_argument.
void export_hf_family(const Gpt& model, int64_t vocab_size, const std::filesystem::path& folder);

// config.json read into our config (vocab padded to vocab_multiple) and every tensor's name, dtype and
// shape checked against it from the safetensors header, no weight read: one-line std::invalid_argument
// naming the file and the field or tensor otherwise (a setting our model does not compute, a missing,
// extra or mis-shaped tensor).
HfGpt2Config check_hf_family_folder(const std::filesystem::path& folder, int64_t vocab_multiple = 64);
// The same checks, then the weights (F32, F16 or BF16, finite) into a new fp32 model.
HfGpt2Model load_hf_family(const std::filesystem::path& folder, int64_t vocab_multiple = 64);

}  // namespace mygpt
