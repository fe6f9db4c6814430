#include "launcher/inference_model.h"

#include <memory>
#include <stdexcept>

#include "dataloader/char_tokenizer.h"

namespace mygpt {

InferenceModel load_inference_model(const std::string& path, const torch::Device& device) {
  LoadedCheckpoint ckpt = load_checkpoint(resolve_checkpoint(path));
  InferenceModel result;
  result.meta = ckpt.meta;
  result.model = ckpt.model;
  result.model->to(device);
  result.model->eval();
  if (ckpt.meta.tokenizer_kind == "char") {
    auto tokenizer = std::make_shared<CharTokenizer>(CharTokenizer::from_vocabulary(ckpt.meta.tokenizer_data));
    result.encode = [tokenizer](const std::string& s) { return tokenizer->encode(s); };
    result.decode = [tokenizer](const std::vector<int64_t>& ids) { return tokenizer->decode(ids); };
  } else {
    throw std::invalid_argument("checkpoint '" + path + "' uses tokenizer '" + ckpt.meta.tokenizer_kind +
                                "', which this build cannot decode");
  }
  return result;
}

}  // namespace mygpt
