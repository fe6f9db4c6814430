#include "launcher/cli.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "model/gpt_config.h"

namespace mygpt {

po::options_description train_options_description() {
  po::options_description data("Data");
  data.add_options()
      ("data", po::value<std::string>()->default_value("builtin:sort"),
       "training data: a UTF-8 text file (character tokenizer) or builtin:sort (generated, offline); "
       "also accepted as the first positional argument")
      ("val-fraction", po::value<double>()->default_value(0.1), "share of a text used for validation (its end)")
      ("data-order", po::value<std::string>()->default_value("sequential"),
       "sequential (consecutive chunks, sharded across ranks) or random (random offsets per rank)");
  po::options_description model("Model");
  model.add_options()
      ("preset", po::value<std::string>()->default_value("small"),
       "model shape: gpt2, gpt2-medium, gpt2-large, gpt2-xl, shakespeare-char, small, tiny")
      ("n-layer", po::value<int64_t>(), "transformer blocks (overrides the preset)")
      ("n-head", po::value<int64_t>(), "attention heads (overrides the preset)")
      ("n-embd", po::value<int64_t>(), "embedding width (overrides the preset)")
      ("block-size", po::value<int64_t>(), "longest context (overrides the preset)")
      ("dropout", po::value<double>(), "dropout probability (overrides the preset)");
  po::options_description training("Training");
  training.add_options()
      ("steps", po::value<int64_t>()->default_value(2000), "optimizer steps")
      ("batch-size", po::value<int64_t>()->default_value(16), "micro-batch rows per rank")
      ("seq-len", po::value<int64_t>()->default_value(0), "tokens per row; 0 means the model's block size")
      ("grad-accum", po::value<int64_t>()->default_value(1), "micro-batches accumulated per optimizer step")
      ("lr", po::value<double>()->default_value(1e-3), "peak learning rate")
      ("min-lr", po::value<double>()->default_value(1e-4), "learning rate at the end of the cosine decay")
      ("warmup-steps", po::value<int64_t>()->default_value(100), "linear warmup steps")
      ("weight-decay", po::value<double>()->default_value(0.1), "AdamW weight decay on 2-D weights")
      ("grad-clip", po::value<double>()->default_value(1.0), "clip the global gradient norm; 0 disables")
      ("seed", po::value<uint64_t>()->default_value(1337), "seed of every random generator");
  po::options_description run("Run");
  run.add_options()
      ("device", po::value<std::string>()->default_value("auto"), "auto, cuda, mps or cpu (auto: cuda > mps > cpu)")
      ("threads", po::value<int64_t>()->default_value(0),
       "intra-op CPU threads per rank; 0 means the node's cores divided by its ranks")
      ("bucket-mb", po::value<double>()->default_value(25.0), "DDP gradient bucket size in MiB")
      ("ddp-overlap", po::value<bool>()->default_value(true),
       "start each bucket's all-reduce during backward (false: all after backward)")
      ("comm-timeout", po::value<double>()->default_value(600.0),
       "seconds a collective may take before the job is declared dead (NCCL); 0 waits forever")
      ("eval-every", po::value<int64_t>()->default_value(250), "validate every N steps; 0 disables")
      ("eval-steps", po::value<int64_t>()->default_value(20), "validation batches per evaluation")
      ("log-every", po::value<int64_t>()->default_value(10), "print a progress line every N steps")
      ("checkpoint-every", po::value<int64_t>()->default_value(0), "checkpoint every N steps; 0: only at the end")
      ("out", po::value<std::string>()->default_value("out"), "output directory: checkpoints, metrics.jsonl")
      ("config", po::value<std::string>(), "read options from FILE (name = value lines); flags override it")
      ("help,h", "show this help");
  po::options_description all("train options");
  all.add(data).add(model).add(training).add(run);
  return all;
}

po::options_description generate_options_description() {
  po::options_description desc("generate options");
  desc.add_options()
      ("checkpoint", po::value<std::string>()->required(), "checkpoint file, or a directory (its newest checkpoint)")
      ("prompt", po::value<std::string>()->default_value("\n"), "text the samples continue")
      ("max-new-tokens", po::value<int64_t>()->default_value(200), "tokens to generate per sample")
      ("temperature", po::value<double>()->default_value(0.8), "softmax temperature; 0 is greedy")
      ("top-k", po::value<int64_t>()->default_value(0), "sample among the k most likely tokens; 0 keeps all")
      ("num-samples", po::value<int64_t>()->default_value(1), "independent samples")
      ("seed", po::value<uint64_t>()->default_value(1337), "seed of every random generator")
      ("device", po::value<std::string>()->default_value("auto"), "auto, cuda, mps or cpu")
      ("config", po::value<std::string>(), "read options from FILE; flags override it")
      ("help,h", "show this help");
  return desc;
}

po::options_description eval_options_description() {
  po::options_description desc("eval options");
  desc.add_options()
      ("checkpoint", po::value<std::string>()->required(), "checkpoint file, or a directory (its newest checkpoint)")
      ("task", po::value<std::string>()->default_value("builtin:sort"),
       "held-out accuracy on a built-in task (greedy decoding of each prompt)")
      ("examples", po::value<int64_t>()->default_value(200), "held-out examples to score")
      ("show", po::value<int64_t>()->default_value(5), "examples to print")
      ("device", po::value<std::string>()->default_value("auto"), "auto, cuda, mps or cpu")
      ("config", po::value<std::string>(), "read options from FILE; flags override it")
      ("help,h", "show this help");
  return desc;
}

ParsedCommand parse_command(const std::string& command, const std::vector<std::string>& args) {
  po::options_description desc;
  po::positional_options_description positional;
  if (command == "train") {
    desc.add(train_options_description());
    positional.add("data", 1);
  } else if (command == "generate") {
    desc.add(generate_options_description());
  } else if (command == "eval") {
    desc.add(eval_options_description());
  } else {
    throw std::invalid_argument("unknown command '" + command + "' (expected train, generate or eval)");
  }
  ParsedCommand parsed;
  po::store(po::command_line_parser(args).options(desc).positional(positional).run(), parsed.values);
  parsed.help = parsed.values.count("help") > 0;
  if (parsed.help) return parsed;
  if (parsed.values.count("config")) {
    const std::string path = parsed.values["config"].as<std::string>();
    std::ifstream file(path);
    if (!file) throw std::invalid_argument("cannot read config file '" + path + "'");
    // Stored after the command line, so flags given there keep their values.
    po::store(po::parse_config_file(file, desc), parsed.values);
  }
  po::notify(parsed.values);
  return parsed;
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: mygpt-ddp <command> [options]\n\n"
         "commands:\n"
         "  train [DATA] [options]     train a GPT (mpirun -np N mygpt-ddp train ... for N ranks)\n"
         "  generate --checkpoint PATH sample text from a trained model\n"
         "  eval --checkpoint PATH     held-out accuracy of a model on a built-in task\n\n"
         "`mygpt-ddp <command> --help` shows one command's options.\n\n"
      << train_options_description() << "\n"
      << generate_options_description() << "\n"
      << eval_options_description();
  return out.str();
}

std::string options_fingerprint(const po::variables_map& values) {
  std::ostringstream out;
  out.precision(17);
  for (const auto& [name, entry] : values) {  // std::map: sorted by name
    const boost::any& v = entry.value();
    out << name << '=';
    if (const auto* s = boost::any_cast<std::string>(&v)) out << *s;
    else if (const auto* i = boost::any_cast<int64_t>(&v)) out << *i;
    else if (const auto* u = boost::any_cast<uint64_t>(&v)) out << *u;
    else if (const auto* d = boost::any_cast<double>(&v)) out << *d;
    else if (const auto* b = boost::any_cast<bool>(&v)) out << *b;
    out << '\n';
  }
  return out.str();
}

int64_t positive(const po::variables_map& values, const std::string& name) {
  const int64_t v = values[name].as<int64_t>();
  if (v <= 0) throw std::invalid_argument("--" + name + " must be positive, got " + std::to_string(v));
  return v;
}

int64_t non_negative(const po::variables_map& values, const std::string& name) {
  const int64_t v = values[name].as<int64_t>();
  if (v < 0) throw std::invalid_argument("--" + name + " must not be negative, got " + std::to_string(v));
  return v;
}

}  // namespace mygpt
