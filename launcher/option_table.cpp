#include "launcher/option_table.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace mygpt {

namespace option_detail {

std::string escaped_line(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
  return out;
}

std::string unescaped_line(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char next = text[++i];
    out += next == 'n' ? '\n' : next == 'r' ? '\r' : next == 't' ? '\t' : next;
  }
  return out;
}

}  // namespace option_detail

void refuse_placeholder_text(const std::string& text, const std::string& where) {
  for (size_t open = text.find('%'); open != std::string::npos; open = text.find('%', open + 1)) {
    size_t end = open + 1;
    while (end < text.size() && (std::islower(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_')) ++end;
    if (end > open + 1 && end < text.size() && text[end] == '%') {
      throw std::invalid_argument(where + " holds '" + text.substr(open, end - open + 1) +
                                  "': %word% sequences are not accepted (the option parser reserves them)");
    }
  }
}

std::string extra_positional_message(const std::vector<std::string>& positional_arguments,
                                     const std::vector<std::pair<std::string, int>>& places) {
  std::size_t allowed = 0;
  std::string names;
  for (const auto& [name, count] : places) {
    allowed += static_cast<std::size_t>(std::max(count, 0));
    names += (names.empty() ? "" : ", ") + ("--" + name);
  }
  const std::string extra =
      allowed < positional_arguments.size() ? positional_arguments[allowed] : std::string("(unknown)");
  if (allowed == 0) {
    return "unexpected argument '" + extra + "': this command takes no positional argument (options are named: --name VALUE)";
  }
  return "unexpected argument '" + extra + "': this command takes " + std::to_string(allowed) +
         " positional argument(s) (" + names + "); the others are named (--name VALUE)";
}

std::string unknown_option_hint(const std::string& unknown, const std::vector<std::string>& known) {
  std::string name = unknown.substr(unknown.find_first_not_of('-') == std::string::npos ? 0 : unknown.find_first_not_of('-'));
  const auto is_known = [&](const std::string& n) { return std::find(known.begin(), known.end(), n) != known.end(); };
  // nanoGPT's configurator names (config/*.py, --key=value) for what is named otherwise here.
  static const std::map<std::string, std::string> nanogpt = {
      {"learning_rate", "lr"},          {"max_iters", "steps"},         {"lr_decay_iters", "steps"},
      {"warmup_iters", "warmup-steps"}, {"eval_iters", "eval-steps"},   {"eval_interval", "eval-every"},
      {"log_interval", "log-every"},    {"out_dir", "out"},             {"dataset", "data"},
      {"gradient_accumulation_steps", "grad-accum"}, {"grad_clip", "grad-clip"}, {"start", "prompt"}};
  if (const auto it = nanogpt.find(name); it != nanogpt.end() && is_known(it->second)) {
    return " (nanoGPT's " + name + " is " + it->second + " here)";
  }
  // nanoGPT's names (train.py, sample.py) that nothing here corresponds to, and what to do instead.
  static const std::map<std::string, std::string> nanogpt_without_equivalent = {
      {"always_save_checkpoint",
       "checkpoints are written every --checkpoint-every steps and at the end, whatever the validation loss; drop "
       "it"},
      {"eval_only", "`mygpt-ddp eval --checkpoint DIR --val DATA` evaluates a checkpoint"},
      {"wandb_log", "no Weights & Biases here: --out's metrics.jsonl holds the curves; drop it"},
      {"wandb_project", "no Weights & Biases here: --out's metrics.jsonl holds the curves; drop it"},
      {"wandb_run_name", "no Weights & Biases here: --out's metrics.jsonl holds the curves; drop it"},
      {"decay_lr", "the learning rate always decays from --lr to --min-lr; --min-lr equal to --lr keeps it flat"},
      {"dtype", "--precision is fp32, bf16, fp16 or auto"},
      {"compile", "no torch.compile in C++; drop it"},
      {"backend", "the communicator follows the device (NCCL on CUDA, MPI or Gloo on CPU); drop it"},
      {"init_from", "--init-from takes a checkpoint or a Hugging Face folder; 'resume' is --resume auto, "
                    "'scratch' is the default"}};
  if (const auto it = nanogpt_without_equivalent.find(name); it != nanogpt_without_equivalent.end()) {
    return " (nanoGPT's " + name + ": " + it->second + ")";
  }
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  if (dashed != name && is_known(dashed)) return " (names use dashes: " + dashed + ")";
  return "";
}

void refuse_unknown_config_names(const std::vector<ConfigFile>& files, const std::vector<std::string>& known) {
  std::string message;
  for (const auto& [path, entries] : files) {
    std::vector<std::string> unknown;
    for (const auto& entry : entries) {
      const bool is_known = entry.name == "help" || std::find(known.begin(), known.end(), entry.name) != known.end();
      if (!is_known && std::find(unknown.begin(), unknown.end(), entry.name) == unknown.end()) {
        unknown.push_back(entry.name);
      }
    }
    if (unknown.empty()) continue;
    message += (message.empty() ? "" : "; ") + ("config file '" + path + "': unrecognised option") +
               (unknown.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < unknown.size(); ++i) {
      message += (i == 0 ? "'" : ", '") + unknown[i] + "'" + unknown_option_hint(unknown[i], known);
    }
  }
  if (!message.empty()) throw std::invalid_argument(message);
}

}  // namespace mygpt
