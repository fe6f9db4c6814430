#pragma once
// The course of a run that options leave open until the data and the start are known: the data order
// that `--data-order auto` picks, and what a resumed run changes of the run its checkpoint continues.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "dataloader/batch_loader.h"

namespace mygpt {

// The "name=value" lines of OptionTable::to_text (a checkpoint's stored run options) as a map.
std::map<std::string, std::string> option_lines(const std::string& text);

struct ChosenDataOrder {
  DataOrder order = DataOrder::sequential;
  std::string note;  // the log's "data order: ..." line when the order was chosen or resumed; else empty
};

// tokens_the_run_reads of a run that ends with its time budget (train --time-budget without --steps): not
// known before it ends, so `auto` shuffles (it may read its data many times).
inline constexpr uint64_t kUnknownTokens = UINT64_MAX;

// A resumed run keeps the order its run used (so a resume with other --steps walks the same data); asking
// it for another is std::invalid_argument. Otherwise the order as given, or for `auto` resolved from how
// often the run reads its training data.
ChosenDataOrder choose_data_order(DataOrder requested, const std::optional<std::string>& stored_run_options,
                                  uint64_t train_tokens, uint64_t tokens_the_run_reads);

// One line naming every option of the run (OptionRow::is_resumed) whose value differs between the
// checkpoint's run and this resumed one, in the option table's order, e.g.
// "resuming with changes: --steps 100 -> 200, --lr 0.001 -> 0.0005 (the learning-rate schedule and the data
// continue on the new values)"; empty when none changed.
std::string resume_changes(const std::string& stored_run_options, const std::string& run_options);

}  // namespace mygpt
