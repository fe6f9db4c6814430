#include "launcher/run_course.h"

#include <sstream>

#include "common/strprintf.h"
#include "launcher/train_flags.h"

namespace mygpt {

std::map<std::string, std::string> option_lines(const std::string& text) {
  std::map<std::string, std::string> options;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) options[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return options;
}

ChosenDataOrder choose_data_order(DataOrder requested, const std::optional<std::string>& stored_run_options,
                                  uint64_t train_tokens, uint64_t tokens_the_run_reads) {
  std::optional<DataOrder> resumed;  // the order of the run a checkpoint continues
  if (stored_run_options) {
    const auto stored = option_lines(*stored_run_options);
    const auto it = stored.find("data-order");
    for (const DataOrder order : {DataOrder::sequential, DataOrder::shuffled, DataOrder::random}) {
      if (it != stored.end() && it->second == data_order_name(order)) resumed = order;
    }
  }
  if (resumed) {
    // The checkpoint's data position is a place in that order: in another order it means nothing.
    if (requested != DataOrder::automatic && requested != *resumed) {
      throw std::invalid_argument(std::string("--data-order ") + data_order_name(requested) +
                                  ": a resumed run keeps its data order (this one reads its data " +
                                  data_order_name(*resumed) +
                                  "); leave --data-order out to continue it, or start a new run in another "
                                  "--out (or with --overwrite) to read in another order");
    }
    return {*resumed, std::string("data order: ") + data_order_name(*resumed) + " (the resumed run's)"};
  }
  if (requested != DataOrder::automatic) return {requested, ""};  // given: the user knows it
  const DataOrder order = resolve_data_order(requested, train_tokens, tokens_the_run_reads);
  if (tokens_the_run_reads == kUnknownTokens) {
    return {order, "data order: shuffled rows, a fresh order each epoch (a run of --time-budget reads its training data "
                   "an unknown number of times; --data-order sequential reads it in order)"};
  }
  const double epochs = static_cast<double>(tokens_the_run_reads) / static_cast<double>(train_tokens);
  if (order == DataOrder::shuffled) {
    return {order, strprintf("data order: shuffled rows, a fresh order each epoch (the run reads its training data "
                             "%.2f times; --data-order sequential reads it in order)", epochs)};
  }
  return {order, strprintf("data order: sequential (the run reads its training data %.2f times, once at most; "
                           "--data-order shuffled shuffles it)", epochs)};
}

std::string resume_changes(const std::string& stored_run_options, const std::string& run_options) {
  const OptionTable<TrainFlags>& table = train_flag_table();
  const auto before = table.entries_of_text(stored_run_options);
  const auto now = table.entries_of_text(run_options);
  std::string changes;
  for (const auto& row : table.rows()) {
    if (!row->is_resumed()) continue;
    const auto a = before.find(row->name()), b = now.find(row->name());
    // Shown as --help shows values: escaped, so a prompt of one newline reads \n.
    const std::string was = a == before.end() ? "unset" : option_detail::escaped_line(a->second);
    const std::string is = b == now.end() ? "unset" : option_detail::escaped_line(b->second);
    if (was != is) changes += (changes.empty() ? "" : ", ") + ("--" + row->name() + " " + was + " -> " + is);
  }
  if (changes.empty()) return "";
  return "resuming with changes: " + changes + " (the learning-rate schedule and the data continue on the new values)";
}

}  // namespace mygpt
