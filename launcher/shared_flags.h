#pragma once
// Options that several commands take, each defined once here and added to a command's table by path
// to the field it fills (e.g. device_flag(table, &TrainFlags::runtime, &RuntimeOptions::device)).
#include <stdexcept>
#include <string>

#include <thread>

#include "launcher/device.h"
#include "launcher/option_table.h"
#include "model/mixed_precision.h"

namespace mygpt {

template <typename Config, typename... Path>
auto& device_flag(OptionTable<Config>& table, Path... path) {
  return table.add("device", path..., "auto, cuda, mps or cpu (auto: cuda > mps > cpu)").init("auto");
}

// Intra-op CPU threads; one thread is often fastest for generation on a machine other jobs share.
template <typename Config, typename... Path>
auto& threads_flag(OptionTable<Config>& table, Path... path) {
  return table.add("threads", path...,
                   "intra-op CPU threads (per rank); 0 means the node's cores divided by its ranks; at most 4 a core")
      .init(0)
      .check(non_negative)
      .check([](const std::string& flag, const int64_t& threads) {
        require_sane_thread_count(flag, threads, std::thread::hardware_concurrency());
      });
}

template <typename Config, typename... Path>
auto& quiet_flag(OptionTable<Config>& table, Path... path) {
  return table.add("quiet", path..., "no progress lines (on a terminal one redrawn line, in a log one every ~10 s)")
      .init(false);
}

template <typename Config, typename... Path>
auto& seed_flag(OptionTable<Config>& table, Path... path) {
  return table.add("seed", path..., "seed of every random generator").init(uint64_t{1337});
}

template <typename Config, typename... Path>
auto& vocab_flag(OptionTable<Config>& table, Path... path) {
  return table.add("vocab", path...,
                   "folder with a BPE tokenizer: a Hugging Face tokenizer.json (byte-level BPE), or GPT-2's files: "
                   "encoder.json and vocab.bpe (OpenAI), or vocab.json and merges.txt");
}

template <typename Config, typename... Path>
auto& precision_flag(OptionTable<Config>& table, Path... path) {
  return table
      .add("precision", path...,
           "arithmetic of matmuls and attention (auto: bf16 autocast on GPUs that have bf16, fp16 autocast with "
           "dynamic loss scaling on older GPUs, fp32 on CPUs); weights stay fp32")
      .names({{"auto", Precision::automatic},
              {"fp32", Precision::fp32},
              {"bf16", Precision::bf16},
              {"fp16", Precision::fp16}})
      .init(Precision::automatic);
}

// --checkpoint of the commands that read a model (launcher/inference_model.h opens it); also their one
// positional argument, as `vllm serve MODEL` and `transformers chat MODEL` take theirs.
template <typename Config, typename... Path>
auto& model_flag(OptionTable<Config>& table, Path... path) {
  table.positional("checkpoint", 1);
  return table
      .add("checkpoint", path...,
           "checkpoint file, a folder (its newest checkpoint), or a Hugging Face folder (config.json, "
           "model.safetensors; its tokenizer.json, or vocab.json and merges.txt, is the tokenizer); also the "
           "positional argument")
      .required();
}

// --temperature and --top-k of the commands that sample (generate, chat); each sets its own default.
template <typename Config, typename... Path>
auto& temperature_flag(OptionTable<Config>& table, Path... path) {
  return table.add("temperature", path..., "softmax temperature; 0 is greedy").check(non_negative);
}

template <typename Config, typename... Path>
auto& top_k_flag(OptionTable<Config>& table, Path... path) {
  return table.add("top-k", path..., "sample among the k most likely tokens; 0 keeps all").check(non_negative);
}

// A --top-k given with --temperature 0 would be silently ignored: refused. --top-k 0 (keep all, a
// default) says nothing greedy decoding contradicts; only a real cut does.
template <typename Config>
void refuse_top_k_when_greedy(const Parsed<Config>& flags, double temperature, int64_t top_k) {
  if (temperature == 0 && flags.gave("top-k") && top_k != 0) {
    throw std::invalid_argument("--top-k has no effect with --temperature 0 (greedy decoding)");
  }
}

// How a job of several ranks meets and how long it waits on a collective (train; eval under a launcher).
template <typename Config, typename... Path>
auto& comm_timeout_flag(OptionTable<Config>& table, Path... path) {
  return table
      .add("comm-timeout", path...,
           "seconds a collective (NCCL, MPI, Gloo) or the rendezvous may take before the job is declared dead; 0 "
           "waits forever; at most 1e9 (deadlines are kept in 64-bit nanoseconds)")
      .init(600.0)
      .check([](const std::string& flag, const double& v) {
        if (!(v >= 0) || v > 1e9) {
          throw std::invalid_argument("--" + flag + " must be 0 (no limit) or a number of seconds up to 1e9, got " +
                                      option_detail::number_text(v));
        }
      });
}

template <typename Config, typename... Path>
auto& rendezvous_flag(OptionTable<Config>& table, Path... path) {
  return table
      .add("rendezvous", path...,
           "how ranks started without MPI (torchrun, srun, RANK/WORLD_SIZE) meet: tcp (a c10d TCP store at "
           "MASTER_ADDR:MASTER_PORT) or file:DIR (a c10d file store in DIR, a folder every rank sees)")
      .init("tcp")
      .check([](const std::string& flag, const std::string& v) {
        if (v != "tcp" && (v.rfind("file:", 0) != 0 || v.size() <= 5)) {
          throw std::invalid_argument("--" + flag + " '" + v + "': expected tcp or file:DIR");
        }
      });
}

}  // namespace mygpt
