#include "eval/evaluator.h"

#include <stdexcept>

namespace mygpt {

Evaluator::Evaluator(const EvaluationPlan& plan, Gpt& model, Communicator& comm, const torch::Device& device,
                     Precision precision, EvaluationRounds rounds)
    : plan_(plan), model_(model), comm_(comm), device_(device), precision_(precision), rounds_(std::move(rounds)) {}

ValidationLoss Evaluator::validation_loss(const std::function<void(int64_t done, double running_loss)>& progress) {
  if (plan_.validation == nullptr) throw std::logic_error("the evaluation plan has no validation data");
  ValidationPass pass;
  pass.batches = plan_.validation_batches;
  pass.vocab_limit = plan_.validation_vocab_limit;
  pass.masked_targets = plan_.conversations;
  pass.bpb = plan_.bits_per_byte;
  pass.stop = rounds_.stop;
  pass.sit_out = rounds_.sit_out;
  pass.progress = progress;
  return mygpt::validation_loss(model_, *plan_.validation, pass, comm_, device_, precision_);
}

HellaSwagResult Evaluator::hellaswag(const std::function<void(int64_t done, int64_t correct)>& on_example) {
  if (plan_.hellaswag == nullptr) throw std::logic_error("the evaluation plan has no HellaSwag examples");
  return evaluate_hellaswag(model_, *plan_.hellaswag, plan_.hellaswag_examples, comm_, device_, precision_, on_example,
                            kHellaSwagExamplesPerBatch, rounds_);
}

CoreScore Evaluator::core(const std::function<void(const std::string& label, int64_t done, int64_t total)>& on_progress) {
  if (plan_.core == nullptr || plan_.core_codec == nullptr) throw std::logic_error("the evaluation plan has no CORE bundle");
  return evaluate_core(model_, *plan_.core, *plan_.core_codec, plan_.core_codec->end_of_text(), plan_.core_max_per_task,
                       comm_, device_, precision_, plan_.core_vocab_limit, on_progress, rounds_);
}

}  // namespace mygpt
