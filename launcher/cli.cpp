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
       "training data (also the first positional argument): builtin:sort (generated offline), a UTF-8 text "
       "file, a token file (llm.c .bin, .npy uint16, raw uint16), a directory of shards or a glob")
      ("val-data", po::value<std::string>(),
       "validation token data; a shard directory's *val* files are used when this is not given")
      ("tokenizer", po::value<std::string>()->default_value("char"), "tokenizer of text data: char or gpt2")
      ("vocab", po::value<std::string>(), "directory with GPT-2's encoder.json and vocab.bpe")
      ("vocab-size", po::value<int64_t>()->default_value(50304), "model vocabulary of token data (GPT-2's, padded)")
      ("val-fraction", po::value<double>()->default_value(0.1), "share of a text used for validation (its end)")
      ("data-order", po::value<std::string>()->default_value("sequential"),
       "sequential (consecutive chunks, sharded across ranks) or random (random offsets per rank)");
  po::options_description model("Model");
  model.add_options()
      ("preset", po::value<std::string>()->default_value("small"),
       "model shape: gpt2, gpt2-medium, gpt2-large, gpt2-xl (these bring the GPT-2 recipe's defaults), "
       "shakespeare-char, small, tiny")
      ("n-layer", po::value<int64_t>(), "transformer blocks (overrides the preset)")
      ("n-head", po::value<int64_t>(), "attention heads (overrides the preset)")
      ("n-embd", po::value<int64_t>(), "embedding width (overrides the preset)")
      ("block-size", po::value<int64_t>(), "longest context (overrides the preset)")
      ("dropout", po::value<double>(), "dropout probability (overrides the preset)");
  po::options_description training("Training (gpt2 presets: their recipe value in brackets)");
  training.add_options()
      ("steps", po::value<int64_t>()->default_value(2000), "optimizer steps [19073]")
      ("batch-size", po::value<int64_t>()->default_value(16), "micro-batch rows per rank")
      ("seq-len", po::value<int64_t>()->default_value(0), "tokens per row; 0 means the model's block size [1024]")
      ("grad-accum", po::value<int64_t>()->default_value(1), "micro-batches accumulated per optimizer step and rank")
      ("total-batch-tokens", po::value<int64_t>()->default_value(0),
       "tokens per optimizer step over all ranks; sets --grad-accum (must divide evenly) [524288]")
      ("lr", po::value<double>()->default_value(1e-3), "peak learning rate [6e-4]")
      ("min-lr", po::value<double>()->default_value(1e-4), "learning rate at the end of the cosine decay [6e-5]")
      ("warmup-steps", po::value<int64_t>()->default_value(100), "linear warmup steps [715]")
      ("weight-decay", po::value<double>()->default_value(0.1), "AdamW weight decay on 2-D weights")
      ("grad-clip", po::value<double>()->default_value(1.0), "clip the global gradient norm; 0 disables")
      ("precision", po::value<std::string>()->default_value("auto"),
       "auto (bf16 autocast on CUDA, fp32 elsewhere), fp32 or bf16; weights stay fp32")
      ("seed", po::value<uint64_t>()->default_value(1337), "seed of every random generator");
  po::options_description run("Run");
  run.add_options()
      ("device", po::value<std::string>()->default_value("auto"), "auto, cuda, mps or cpu (auto: cuda > mps > cpu)")
      ("threads", po::value<int64_t>()->default_value(0),
       "intra-op CPU threads per rank; 0 means the node's cores divided by its ranks")
      ("out", po::value<std::string>()->default_value("out"), "output directory: checkpoints, metrics.jsonl")
      ("resume", po::value<std::string>()->default_value(""),
       "auto (newest checkpoint in --out, if any) or a checkpoint path; empty starts afresh")
      ("checkpoint-every", po::value<int64_t>()->default_value(0), "checkpoint every N steps; 0: only at the end [5000]")
      ("keep-checkpoints", po::value<int64_t>()->default_value(0), "keep only the newest N checkpoints; 0 keeps all")
      ("eval-every", po::value<int64_t>()->default_value(250), "validation loss every N steps; 0 disables")
      ("eval-steps", po::value<int64_t>()->default_value(20), "validation batches per rank and evaluation")
      ("hellaswag", po::value<std::string>(), "HellaSwag file (official jsonl or llama.cpp's 6-line text); needs --vocab")
      ("hellaswag-every", po::value<int64_t>()->default_value(250), "HellaSwag every N steps when --hellaswag is given")
      ("hellaswag-examples", po::value<int64_t>()->default_value(0), "examples per HellaSwag evaluation; 0 means all")
      ("sample-every", po::value<int64_t>()->default_value(0), "rank 0 prints a sample every N steps; 0 disables")
      ("sample-prompt", po::value<std::string>()->default_value("\n"), "prompt of those samples")
      ("sample-tokens", po::value<int64_t>()->default_value(64), "tokens per sample")
      ("log-every", po::value<int64_t>()->default_value(10), "print a progress line every N steps")
      ("peak-tflops", po::value<double>()->default_value(0.0),
       "the device's peak TFLOP/s for MFU; 0 looks the GPU up in a table (unknown: n/a)")
      ("bucket-mb", po::value<double>()->default_value(25.0), "DDP gradient bucket size in MiB")
      ("ddp-overlap", po::value<bool>()->default_value(true),
       "start each bucket's all-reduce during backward (false: all after backward)")
      ("comm-timeout", po::value<double>()->default_value(600.0),
       "seconds a collective may take before the job is declared dead (NCCL); 0 waits forever")
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
      ("vocab", po::value<std::string>(), "directory with GPT-2's encoder.json and vocab.bpe (for token-data models)")
      ("config", po::value<std::string>(), "read options from FILE; flags override it")
      ("help,h", "show this help");
  return desc;
}

po::options_description eval_options_description() {
  po::options_description desc("eval options (one of --val, --hellaswag, --task)");
  desc.add_options()
      ("checkpoint", po::value<std::string>()->required(), "checkpoint file, or a directory (its newest checkpoint)")
      ("val", po::value<std::string>(), "validation loss on token data (file, shard directory or glob)")
      ("hellaswag", po::value<std::string>(), "HellaSwag accuracy (official jsonl or llama.cpp's 6-line text)")
      ("task", po::value<std::string>(), "held-out accuracy on a built-in task such as builtin:sort (greedy decoding)")
      ("examples", po::value<int64_t>()->default_value(0), "examples to score; 0 means all (builtin task: 200)")
      ("eval-steps", po::value<int64_t>()->default_value(20), "validation batches (--val)")
      ("batch-size", po::value<int64_t>()->default_value(8), "validation batch rows (--val)")
      ("seq-len", po::value<int64_t>()->default_value(0), "validation row length; 0 means the block size (--val)")
      ("show", po::value<int64_t>()->default_value(5), "builtin task examples to print")
      ("precision", po::value<std::string>()->default_value("auto"), "auto (bf16 on CUDA), fp32 or bf16")
      ("vocab", po::value<std::string>(), "directory with GPT-2's encoder.json and vocab.bpe")
      ("device", po::value<std::string>()->default_value("auto"), "auto, cuda, mps or cpu")
      ("config", po::value<std::string>(), "read options from FILE; flags override it")
      ("help,h", "show this help");
  return desc;
}

po::options_description prepare_options_description() {
  po::options_description desc("prepare options");
  desc.add_options()
      ("input", po::value<std::vector<std::string>>()->multitoken()->required(),
       "text files (each one document) or JSON-lines files (one document per line, field \"text\")")
      ("out", po::value<std::string>()->required(), "output directory for train_*.bin / val_*.bin shards")
      ("tokenizer", po::value<std::string>()->default_value("gpt2"), "gpt2 (needs --vocab) or char")
      ("vocab", po::value<std::string>(), "directory with GPT-2's encoder.json and vocab.bpe")
      ("shard-tokens", po::value<int64_t>()->default_value(100000000), "tokens per shard")
      ("val-tokens", po::value<int64_t>()->default_value(1048576), "tokens for val shards, taken first; 0: train only")
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
  } else if (command == "prepare") {
    desc.add(prepare_options_description());
    positional.add("input", -1);
  } else if (command == "plan") {
    desc.add(train_options_description());
    positional.add("data", 1);
  } else {
    throw std::invalid_argument("unknown command '" + command + "' (expected train, generate, eval, prepare or plan)");
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
         "  eval --checkpoint PATH     validation loss, HellaSwag or built-in task accuracy of a model\n"
         "  prepare --input FILE...    tokenize text into llm.c .bin shards\n"
         "  plan [train options]       dry run: parameters, FLOPs and memory of a configuration\n\n"
         "`mygpt-ddp <command> --help` shows one command's options.\n\n"
      << train_options_description() << "\n"
      << generate_options_description() << "\n"
      << eval_options_description() << "\n"
      << prepare_options_description() << "\n"
      << "plan options: those of train\n";
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
