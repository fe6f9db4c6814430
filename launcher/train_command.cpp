// `mygpt-ddp train`: turns options into a model, data loaders, an optimizer and communicators, then
// hands them to the Trainer.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

#include "dataloader/batch_loader.h"
#include "dataloader/hellaswag_reader.h"
#include "dataloader/text_codec.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "distributed/job_communicators.h"
#include "launcher/recipe.h"
#include "launcher/stop_signal.h"
#include "model/sampling.h"
#include "launcher/training_data.h"
#include "mygpt/build_config.h"
#include "trainer/trainer.h"

namespace mygpt {
namespace {

std::unique_ptr<BatchLoader> make_train_loader(std::shared_ptr<const TokenSource> tokens, const TrainOptions& o,
                                               int rank, int world) {
  if (o.data_order == "sequential") return std::make_unique<ShardedBatchLoader>(tokens, o.batch_size, o.seq_len, rank, world);
  if (o.data_order == "random") return std::make_unique<RandomBatchSampler>(tokens, o.batch_size, o.seq_len, o.seed, rank);
  throw std::invalid_argument("--data-order must be sequential or random, got '" + o.data_order + "'");
}

std::vector<TokenizedHellaSwag> load_hellaswag(const po::variables_map& v, const TrainingData& data) {
  if (!v.count("hellaswag")) return {};
  if (data.tokenizer_kind != "gpt2") {
    throw std::invalid_argument("--hellaswag needs the GPT-2 tokenizer: give --vocab DIR (and GPT-2 token data)");
  }
  const auto codec = make_text_codec("gpt2", data.tokenizer_data);
  return read_tokenized_hellaswag(v["hellaswag"].as<std::string>(), *codec, non_negative(v, "hellaswag-examples"));
}

// A fresh run, or the checkpoint --resume names: "auto" takes the newest in --out when there is one.
std::optional<std::filesystem::path> checkpoint_to_resume(const po::variables_map& v, const TrainOptions& o) {
  const std::string resume = v["resume"].as<std::string>();
  if (resume.empty() || resume == "none") return std::nullopt;
  if (resume == "auto") return latest_checkpoint(o.out_dir);
  return resolve_checkpoint(resume);
}

}  // namespace

int run_train(const po::variables_map& v, const MpiSession& mpi) {
  // Topology and device: cuda:<local rank> on GPUs; on CPU the node's cores are shared among its ranks.
  const WorldInfo& w = mpi.world();
  const torch::Device device = pick_device(v["device"].as<std::string>(), w.local_rank, w.local_size);
  int64_t threads = non_negative(v, "threads");
  if (threads == 0) threads = std::max<int64_t>(1, std::thread::hardware_concurrency() / w.local_size);
  torch::set_num_threads(static_cast<int>(threads));
  JobCommunicators comms(mpi, device, v["comm-timeout"].as<double>());
  require_same_config_on_all_ranks(comms.host(), options_fingerprint(v) + "build=" + MYGPT_VERSION);
  Communicator& comm = comms.device();
  RunOutput output = RunOutput::for_rank(w.rank, v["out"].as<std::string>());
  output.print("device: " + device_name(device));
  output.print(strprintf("world: %d rank(s) on %d node(s), %d per node | backend %s | %lld thread(s) per rank",
                         w.world_size, w.node_count, w.local_size, comm.backend_name().c_str(),
                         static_cast<long long>(threads)));

  // Data first: for character data its tokenizer sets the model's vocabulary.
  const TrainingData data = load_training_data(v);
  const GptConfig model_config = model_config_from(v, data.vocab_size);
  TrainOptions options = train_options_from(v, model_config, device, w.world_size);
  if (device.is_cuda()) at::globalContext().setFloat32MatmulPrecision("high");  // TF32 for fp32 matmuls
  if (options.peak_tflops == 0 && device.is_cuda()) options.peak_tflops = known_peak_tflops(device_name(device));

  auto train_loader = make_train_loader(data.train, options, w.rank, w.world_size);
  std::unique_ptr<ShardedBatchLoader> val_loader;
  if (data.val && data.val->size() > static_cast<uint64_t>(options.batch_size * options.seq_len)) {
    val_loader = std::make_unique<ShardedBatchLoader>(data.val, options.batch_size, options.seq_len, w.rank, w.world_size);
  } else if (options.eval_every > 0) {
    output.print("note: no validation data of at least one batch; validation loss is off");
  }
  const std::vector<TokenizedHellaSwag> hellaswag = load_hellaswag(v, data);

  seed_everything(options.seed);
  Gpt model(model_config);
  model->to(device);
  broadcast_model_state(*model, comm);  // every rank starts from rank 0's weights
  AdamW optimizer(model->decay_parameters(), model->no_decay_parameters(),
                  AdamWOptions{options.lr, 0.9, 0.95, 1e-8, options.weight_decay});

  TrainerParts parts;
  parts.model = model;
  parts.optimizer = &optimizer;
  parts.train_loader = train_loader.get();
  parts.val_loader = val_loader.get();
  parts.hellaswag = hellaswag.empty() ? nullptr : &hellaswag;
  parts.comm = &comm;
  parts.output = &output;
  parts.device = device;
  parts.checkpoint_meta = CheckpointMeta{model_config, data.tokenizer_kind, data.tokenizer_data, 0, options.to_text()};
  parts.peak_memory_mib = [device] { return peak_memory_mib(device); };
  parts.stop_requested = stop_requested;
  install_stop_signal_handlers();
  if (options.sample_every > 0 && data.tokenizer_kind != "none") {
    // Samples draw from their own CPU generator, so printing them leaves training's random streams alone.
    auto codec = std::shared_ptr<TextCodec>(make_text_codec(data.tokenizer_kind, data.tokenizer_data));
    const auto prompt = codec->encode(v["sample-prompt"].as<std::string>());
    if (prompt.empty()) throw std::invalid_argument("--sample-prompt must not be empty");
    SamplingOptions sampling{positive(v, "sample-tokens"), 1.0, 50};
    auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
    parts.sample = [codec, prompt, sampling, generator, device](Gpt& m) mutable {
      generator.set_current_seed(generator.current_seed());  // the same sample stream every time
      auto out = generate(m, torch::tensor(prompt, torch::kLong).unsqueeze(0).to(device), sampling, generator);
      out = out.squeeze(0).to(torch::kCPU);
      return codec->decode(std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel()));
    };
  }
  Trainer trainer(std::move(parts), options);

  int64_t start_step = 0;
  if (const auto resume = checkpoint_to_resume(v, options)) {
    LoadedCheckpoint ckpt = load_checkpoint(*resume);
    start_step = trainer.restore(ckpt);
    output.print("resumed from " + resume->string() + " at step " + std::to_string(start_step));
  }
  output.print("data: " + data.description + strprintf(" | train %llu tokens", static_cast<unsigned long long>(data.train->size())));
  output.print(strprintf("model: %lld layers, %lld heads, %lld wide, block %lld, vocab %lld | %lld parameters",
                         static_cast<long long>(model_config.n_layer), static_cast<long long>(model_config.n_head),
                         static_cast<long long>(model_config.n_embd), static_cast<long long>(model_config.block_size),
                         static_cast<long long>(model_config.vocab_size), static_cast<long long>(model->num_parameters())));
  output.print(strprintf("batch: %lld x %lld tokens x %lld accumulation x %d ranks = %lld tokens per step | %s",
                         static_cast<long long>(options.batch_size), static_cast<long long>(options.seq_len),
                         static_cast<long long>(options.grad_accum), w.world_size,
                         static_cast<long long>(options.batch_size * options.seq_len * options.grad_accum * w.world_size),
                         options.bf16 ? "bf16 autocast" : "fp32"));
  output.open_metrics(/*append=*/start_step > 0);

  const TrainSummary summary = trainer.run(start_step);
  if (summary.stopped_early) {
    output.print("stopped early; continue with --resume auto");
  } else if (summary.steps_run > 0) {
    output.print(strprintf("done: loss %.4f -> %.4f over %lld steps", summary.first_loss, summary.last_loss,
                           static_cast<long long>(summary.steps_run)));
  }
  return 0;
}

}  // namespace mygpt
