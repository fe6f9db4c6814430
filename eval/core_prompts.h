#pragma once
// CORE's items turned into what the scoring loop takes, exactly as nanochat's core_eval.py and
// base_eval.py do it:
//   - a task's items are shuffled with Python's random.Random(1337).shuffle and cut to max_per_task
//     (0: all); item i's few-shot examples are random.Random(1234 + i).sample of the other items' indices
//     (all of them where there are fewer than num_fewshot: nanochat stops there);
//   - prompts are rendered per type (each few-shot example followed by a blank line; the language-modeling
//     context trimmed of whitespace, and its prompt without the continuation stripped) and tokenized with
//     BOS first (none where the tokenizer has none);
//   - the span scored: after the choices' common token prefix (multiple choice), the contexts' common token
//     suffix (schema), after the prompt without the continuation (language modeling; it must be a token
//     prefix of the prompt with it).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/core_bundle.h"
#include "eval/scoring_item.h"

namespace mygpt {

class TextCodec;

// The positions (into task.items) of the items scored, in nanochat's order.
std::vector<size_t> core_item_order(size_t items, int64_t max_per_task);
// The few-shot examples of item `index` of `count` scored items: positions among those items.
std::vector<size_t> core_fewshot(size_t count, size_t index, int64_t num_fewshot);

// The prompts of an item (a choice or context option each; language modeling: without, then with the
// continuation).
std::vector<std::string> render_core_prompts(const CoreTask& task, const CoreItem& item,
                                             const std::vector<const CoreItem*>& fewshot);

// The item as rows and spans. bos < 0: no BOS. A language-modeling prompt whose tokens without the
// continuation are not a prefix of those with it is std::invalid_argument naming the file and line.
ScoringItem core_scoring_item(const CoreTask& task, const CoreItem& item, const std::vector<const CoreItem*>& fewshot,
                              const TextCodec& codec, int64_t bos);

// Python's str.strip(): Unicode whitespace (str.isspace) off both ends of UTF-8 text.
std::string python_strip(std::string_view text);

}  // namespace mygpt
