#include "eval/core_eval.h"

#include "common/strprintf.h"
#include "eval/core_prompts.h"
#include "eval/choice_scoring.h"

namespace mygpt {
namespace {

// Items in one forward: their rows (every choice) padded to the longest.
constexpr int64_t kCoreItemsPerBatch = 8;

int64_t scored_count(const CoreTask& task, int64_t max_per_task) {
  const auto n = static_cast<int64_t>(task.items.size());
  return max_per_task > 0 ? std::min(n, max_per_task) : n;
}

}  // namespace

std::vector<std::string> core_fewshot_notes(const CoreBundle& bundle, int64_t max_per_task) {
  std::vector<std::string> notes;
  for (const CoreTask& task : bundle.tasks) {
    const int64_t n = scored_count(task, max_per_task);
    if (task.num_fewshot > 0 && n - 1 < task.num_fewshot) {
      notes.push_back(strprintf("note: CORE task %s scores %lld item(s), fewer than its %lld shots + 1: each item takes "
                                "all %lld other(s) as its examples",
                                task.label.c_str(), static_cast<long long>(n), static_cast<long long>(task.num_fewshot),
                                static_cast<long long>(n - 1)));
    }
  }
  return notes;
}

CoreScore evaluate_core(Gpt& model, const CoreBundle& bundle, const TextCodec& codec, int64_t bos, int64_t max_per_task,
                        Communicator& comm, const torch::Device& device, Precision precision, int64_t vocab_limit,
                        const std::function<void(const std::string& label, int64_t done, int64_t total)>& on_progress,
                        const EvaluationRounds& rounds) {
  CoreScore score;
  double centered_sum = 0;
  for (const CoreTask& task : bundle.tasks) {
    const std::vector<size_t> order = core_item_order(task.items.size(), max_per_task);
    const auto count = static_cast<int64_t>(order.size());
    const auto item_at = [&](int64_t i) {
      std::vector<const CoreItem*> shots;
      for (size_t s : core_fewshot(order.size(), static_cast<size_t>(i), task.num_fewshot)) {
        shots.push_back(&task.items[order[s]]);
      }
      return core_scoring_item(task, task.items[order[static_cast<size_t>(i)]], shots, codec, bos);
    };
    std::function<void(int64_t, int64_t)> on_item;
    if (on_progress) on_item = [&](int64_t done, int64_t) { on_progress(task.label, done, count); };
    const ScoringPass pass = score_items(model, count, item_at, comm, device, precision, vocab_limit, kCoreItemsPerBatch,
                                         on_item, rounds);
    if (pass.stopped) {
      score.stopped = true;
      return score;
    }
    CoreTaskScore t;
    t.label = task.label;
    t.type = task.type;
    t.items = pass.total;
    t.accuracy = pass.accuracy();
    const double rb = 0.01 * task.random_baseline;
    t.centered = (t.accuracy - rb) / (1.0 - rb);
    centered_sum += t.centered;
    score.tasks.push_back(t);
  }
  score.core = score.tasks.empty() ? 0.0 : centered_sum / static_cast<double>(score.tasks.size());
  return score;
}

nlohmann::json core_score_json(const CoreScore& score) {
  nlohmann::json tasks = nlohmann::json::object();
  for (const CoreTaskScore& t : score.tasks) {
    tasks[t.label] = {{"type", std::string(core_task_type_name(t.type))},
                      {"accuracy", t.accuracy},
                      {"centered", t.centered},
                      {"examples", t.items}};
  }
  return {{"core", score.core}, {"tasks", tasks}};
}

}  // namespace mygpt
