#include "launcher/recipe.h"

#include <stdexcept>

namespace mygpt {
namespace {

bool is_gpt2_family(const std::string& preset) { return preset.rfind("gpt2", 0) == 0; }

// The value of a flag, or the GPT-2 recipe's value when the flag was left at its default.
template <typename T>
T recipe_value(const po::variables_map& v, const std::string& name, bool gpt2, T gpt2_value) {
  return gpt2 && v[name].defaulted() ? gpt2_value : v[name].as<T>();
}

int64_t require_positive(int64_t value, const char* flag) {
  if (value <= 0) throw std::invalid_argument(std::string("--") + flag + " must be positive, got " + std::to_string(value));
  return value;
}

}  // namespace

GptConfig model_config_from(const po::variables_map& v, int64_t vocab_size) {
  GptConfig config = preset_config(v["preset"].as<std::string>());
  if (v.count("n-layer")) config.n_layer = v["n-layer"].as<int64_t>();
  if (v.count("n-head")) config.n_head = v["n-head"].as<int64_t>();
  if (v.count("n-embd")) config.n_embd = v["n-embd"].as<int64_t>();
  if (v.count("block-size")) config.block_size = v["block-size"].as<int64_t>();
  if (v.count("dropout")) config.dropout = v["dropout"].as<double>();
  config.vocab_size = vocab_size;  // the data decides: character vocabulary, or the (padded) BPE one
  config.validate();
  return config;
}

TrainOptions train_options_from(const po::variables_map& v, const GptConfig& model, const torch::Device& device,
                                int world_size) {
  const bool gpt2 = is_gpt2_family(v["preset"].as<std::string>());
  TrainOptions o;
  o.steps = require_positive(recipe_value<int64_t>(v, "steps", gpt2, 19073), "steps");
  o.batch_size = positive(v, "batch-size");
  o.seq_len = recipe_value<int64_t>(v, "seq-len", gpt2, 1024);
  if (o.seq_len < 0) throw std::invalid_argument("--seq-len must not be negative");
  if (o.seq_len == 0) o.seq_len = model.block_size;
  if (o.seq_len > model.block_size) {
    throw std::invalid_argument("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's block size " +
                                std::to_string(model.block_size));
  }
  // Accumulation: given directly, or derived from the total batch so that the recipe's batch holds
  // whatever the number of ranks and the micro-batch size.
  const int64_t total = recipe_value<int64_t>(v, "total-batch-tokens", gpt2 && v["grad-accum"].defaulted(), 524288);
  if (total < 0) throw std::invalid_argument("--total-batch-tokens must not be negative");
  if (total > 0) {
    if (!v["grad-accum"].defaulted() && !v["total-batch-tokens"].defaulted()) {
      throw std::invalid_argument("give --total-batch-tokens or --grad-accum, not both");
    }
    const int64_t per_micro_step = o.batch_size * o.seq_len * world_size;
    if (total % per_micro_step != 0) {
      throw std::invalid_argument("--total-batch-tokens " + std::to_string(total) + " is not a multiple of batch size x seq len x ranks = " +
                                  std::to_string(per_micro_step));
    }
    o.grad_accum = total / per_micro_step;
  } else {
    o.grad_accum = positive(v, "grad-accum");
  }
  o.lr = recipe_value<double>(v, "lr", gpt2, 6e-4);
  o.min_lr = recipe_value<double>(v, "min-lr", gpt2, 6e-5);
  if (!(o.lr > 0) || o.min_lr < 0 || o.min_lr > o.lr) {
    throw std::invalid_argument("learning rates must satisfy 0 <= --min-lr <= --lr and --lr > 0");
  }
  o.warmup_steps = recipe_value<int64_t>(v, "warmup-steps", gpt2, 715);
  if (o.warmup_steps < 0) throw std::invalid_argument("--warmup-steps must not be negative");
  o.weight_decay = v["weight-decay"].as<double>();
  o.grad_clip = v["grad-clip"].as<double>();
  if (o.weight_decay < 0 || o.grad_clip < 0) {
    throw std::invalid_argument("--weight-decay and --grad-clip must not be negative");
  }
  o.eval_every = non_negative(v, "eval-every");
  o.eval_steps = positive(v, "eval-steps");
  o.log_every = positive(v, "log-every");
  o.checkpoint_every = recipe_value<int64_t>(v, "checkpoint-every", gpt2, 5000);
  if (o.checkpoint_every < 0) throw std::invalid_argument("--checkpoint-every must not be negative");
  o.keep_checkpoints = non_negative(v, "keep-checkpoints");
  o.seed = v["seed"].as<uint64_t>();
  o.out_dir = v["out"].as<std::string>();
  o.bucket_mb = v["bucket-mb"].as<double>();
  if (!(o.bucket_mb > 0)) throw std::invalid_argument("--bucket-mb must be positive");
  o.ddp_overlap = v["ddp-overlap"].as<bool>();
  o.data_order = v["data-order"].as<std::string>();
  const std::string precision = v["precision"].as<std::string>();
  if (precision != "auto" && precision != "fp32" && precision != "bf16") {
    throw std::invalid_argument("--precision must be auto, fp32 or bf16, got '" + precision + "'");
  }
  o.bf16 = precision == "bf16" || (precision == "auto" && device.is_cuda());
  o.hellaswag_every = non_negative(v, "hellaswag-every");
  o.hellaswag_limit = non_negative(v, "hellaswag-examples");
  o.sample_every = non_negative(v, "sample-every");
  o.peak_tflops = v["peak-tflops"].as<double>();
  if (o.peak_tflops < 0) throw std::invalid_argument("--peak-tflops must not be negative");
  return o;
}

}  // namespace mygpt
