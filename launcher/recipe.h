#pragma once
// From parsed train options to a model shape and TrainOptions. The GPT-2 presets bring the recipe of
// "Let's reproduce GPT-2 (124M)" as their defaults (524,288-token batches, max LR 6e-4 with a 10%
// floor, 715 warmup steps, 19,073 steps, seq 1024); any flag given explicitly still wins.
#include <torch/torch.h>

#include "launcher/cli.h"
#include "model/gpt_config.h"
#include "trainer/train_options.h"

namespace mygpt {

GptConfig model_config_from(const po::variables_map& values, int64_t vocab_size);
TrainOptions train_options_from(const po::variables_map& values, const GptConfig& model, const torch::Device& device,
                                int world_size);

}  // namespace mygpt
