#pragma once
// GPT-2 weights in Hugging Face's layout: a folder with config.json and model.safetensors (or the
// sharded model.safetensors.index.json + shards), as transformers' save_pretrained writes it.
//
// HF names match our parameter names up to the "transformer." prefix (GPT2LMHeadModel writes it,
// GPT2Model does not; both are read). HF's attention and MLP projections are Conv1D modules that
// store their weight as (in, out): they are transposed to nn.Linear's (out, in) on the way in and
// back on the way out. The output head is tied to the token embedding in both models.
//
// Vocabulary padding: the imported model's embedding is padded with zero rows up to a multiple of
// `vocab_multiple` (50257 -> 50304 by default). A zero row scores logit 0, which beats the strongly
// negative logits of real GPT-2, so whatever consumes the logits must ignore the padded ids:
// sampling with SamplingOptions::vocab_limit, losses through limit_vocab() (model/sampling.h).
// vocab_multiple 1 imports the vocabulary unpadded.
#include <cstdint>
#include <filesystem>

#include "model/gpt.h"
#include "model/gpt_config.h"
#include "model/hf/hf_family.h"
#include "model/hf/hf_folder.h"

namespace mygpt {

// Reads folder/config.json. Settings that change the math and that our model does not implement
// are refused with a one-line std::invalid_argument naming the file and the field: model_type
// other than gpt2, activation_function other than gelu_new / gelu_pytorch_tanh, layer_norm_epsilon
// other than 1e-5, n_inner other than 4 * n_embd, scale_attn_weights false,
// scale_attn_by_inverse_layer_idx true, add_cross_attention true. reorder_and_upcast_attn is
// accepted: it only changes rounding in mixed precision. Dropouts are training settings and are not
// carried over (the model is imported with dropout 0). Absent fields take transformers' defaults.
HfGpt2Config read_hf_gpt2_config(const std::filesystem::path& folder, int64_t vocab_multiple = 64);
// read_hf_gpt2_config, and the weights' names, dtypes and shapes (from the safetensors headers, which are
// checked against the files' sizes) against what config.json claims, without reading a weight: what a
// command checks before it builds a model of the claimed shape. Errors as load_hf_gpt2's.
// The folder is read by model/hf/hf_folder's one reader (this file holds GPT-2's mapping of it); these two
// refuse any model_type but gpt2.
HfGpt2Config check_hf_gpt2_folder(const std::filesystem::path& folder, int64_t vocab_multiple = 64);

// Reads the config and the weights (model.safetensors, else model.safetensors.index.json with its
// shards) into a new model. F32, F16 and BF16 weights are accepted and converted to fp32. Missing,
// unexpected, duplicated, mis-shaped, non-finite or wrongly typed tensors are one-line
// std::invalid_argument errors naming the file and the tensor; so is an lm_head.weight that differs
// from the token embedding (an untied head). The attention-mask buffers (.attn.bias,
// .attn.masked_bias) that older saves contain are skipped.
HfGpt2Model load_hf_gpt2(const std::filesystem::path& folder, int64_t vocab_multiple = 64);

// Writes `folder` (created if missing) as transformers' GPT2LMHeadModel.from_pretrained reads it:
// config.json and model.safetensors with the first vocab_size rows of the embedding, fp32,
// "transformer."-prefixed names, Conv1D-transposed weights, and no lm_head.weight (tied). Each file
// is written atomically, config.json last. A model without biases (bias=false) is written with zero
// biases, which computes the same function. bos/eos are `special`'s where set (a chat model's
// <|bos|> and <|assistant_end|>), else 50256 when vocab_size is GPT-2's 50257, null otherwise. The
// tokenizer files are not written here. vocab_size must be in
// 1..model->config().vocab_size, else std::invalid_argument.
void export_hf_gpt2(const Gpt& model, int64_t vocab_size, const std::filesystem::path& folder,
                    const HfSpecialTokenIds& special = {});

}  // namespace mygpt
