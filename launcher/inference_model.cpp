#include "launcher/inference_model.h"

#include <stdexcept>

namespace mygpt {

InferenceModel load_inference_model(const std::string& path, const torch::Device& device,
                                    const std::string& vocab_dir) {
  const Checkpoint ckpt = load_checkpoint(resolve_checkpoint(path));
  InferenceModel result;
  result.meta = ckpt.meta;
  result.model = model_from_checkpoint(ckpt);
  result.model->to(device);
  result.model->eval();
  if (!vocab_dir.empty()) {
    result.codec = make_text_codec(TokenizerKind::gpt2, vocab_dir);
  } else if (ckpt.meta.tokenizer_kind == TokenizerKind::none) {
    throw std::invalid_argument("checkpoint '" + path +
                                "' was trained on token data without --vocab: "
                                "give --vocab DIR (GPT-2's encoder.json and vocab.bpe)");
  } else {
    result.codec = make_text_codec(ckpt.meta.tokenizer_kind, ckpt.meta.tokenizer_data);
  }
  return result;
}

}  // namespace mygpt
