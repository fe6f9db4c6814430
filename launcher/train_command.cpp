// `mygpt-ddp train`: turns options into a model, data loaders, an optimizer and a communicator, then
// hands them to the Trainer.
#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>

#include "dataloader/batch_loader.h"
#include "dataloader/builtin_dataset.h"
#include "dataloader/char_tokenizer.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/job_communicators.h"
#include "mygpt/build_config.h"
#include "trainer/trainer.h"

namespace mygpt {
namespace {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw std::invalid_argument("data file '" + path + "' does not exist");
  if (std::filesystem::is_directory(path, ec)) throw std::invalid_argument("data path '" + path + "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read data file '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::invalid_argument("cannot read data file '" + path + "'");
  if (text.empty()) throw std::invalid_argument("data file '" + path + "' is empty");
  return text;
}

GptConfig model_config_from(const po::variables_map& v, int64_t vocab_size) {
  GptConfig config = preset_config(v["preset"].as<std::string>());
  if (v.count("n-layer")) config.n_layer = v["n-layer"].as<int64_t>();
  if (v.count("n-head")) config.n_head = v["n-head"].as<int64_t>();
  if (v.count("n-embd")) config.n_embd = v["n-embd"].as<int64_t>();
  if (v.count("block-size")) config.block_size = v["block-size"].as<int64_t>();
  if (v.count("dropout")) config.dropout = v["dropout"].as<double>();
  config.vocab_size = vocab_size;  // character data: the tokenizer decides
  config.validate();
  return config;
}

TrainOptions train_options_from(const po::variables_map& v, const GptConfig& model) {
  TrainOptions o;
  o.steps = positive(v, "steps");
  o.batch_size = positive(v, "batch-size");
  o.seq_len = non_negative(v, "seq-len");
  if (o.seq_len == 0) o.seq_len = model.block_size;
  if (o.seq_len > model.block_size) {
    throw std::invalid_argument("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's block size " +
                                std::to_string(model.block_size));
  }
  o.grad_accum = positive(v, "grad-accum");
  o.lr = v["lr"].as<double>();
  o.min_lr = v["min-lr"].as<double>();
  if (!(o.lr > 0) || o.min_lr < 0 || o.min_lr > o.lr) {
    throw std::invalid_argument("learning rates must satisfy 0 <= --min-lr <= --lr and --lr > 0");
  }
  o.warmup_steps = non_negative(v, "warmup-steps");
  o.weight_decay = v["weight-decay"].as<double>();
  o.grad_clip = v["grad-clip"].as<double>();
  if (o.weight_decay < 0 || o.grad_clip < 0) throw std::invalid_argument("--weight-decay and --grad-clip must not be negative");
  o.eval_every = non_negative(v, "eval-every");
  o.eval_steps = positive(v, "eval-steps");
  o.log_every = positive(v, "log-every");
  o.checkpoint_every = non_negative(v, "checkpoint-every");
  o.seed = v["seed"].as<uint64_t>();
  o.out_dir = v["out"].as<std::string>();
  o.bucket_mb = v["bucket-mb"].as<double>();
  if (!(o.bucket_mb > 0)) throw std::invalid_argument("--bucket-mb must be positive");
  o.ddp_overlap = v["ddp-overlap"].as<bool>();
  return o;
}

std::unique_ptr<BatchLoader> make_train_loader(const std::string& order, std::shared_ptr<const TokenSource> tokens,
                                               const TrainOptions& o, int rank, int world) {
  if (order == "sequential") return std::make_unique<ShardedBatchLoader>(tokens, o.batch_size, o.seq_len, rank, world);
  if (order == "random") return std::make_unique<RandomBatchSampler>(tokens, o.batch_size, o.seq_len, o.seed, rank);
  throw std::invalid_argument("--data-order must be sequential or random, got '" + order + "'");
}

}  // namespace

int run_train(const po::variables_map& v, const MpiSession& mpi) {
  // Topology and device: cuda:<local rank> on GPUs; on CPU the node's cores are shared among its ranks.
  const WorldInfo& w = mpi.world();
  const int rank = w.rank, world = w.world_size;
  const torch::Device device = pick_device(v["device"].as<std::string>(), w.local_rank, w.local_size);
  int64_t threads = non_negative(v, "threads");
  if (threads == 0) threads = std::max<int64_t>(1, std::thread::hardware_concurrency() / w.local_size);
  torch::set_num_threads(static_cast<int>(threads));
  JobCommunicators comms(mpi, device, v["comm-timeout"].as<double>());
  require_same_config_on_all_ranks(comms.host(), options_fingerprint(v) + "build=" + MYGPT_VERSION);
  Communicator& comm = comms.device();

  RunOutput output = RunOutput::for_rank(rank, v["out"].as<std::string>());
  output.print("device: " + describe_device(device));
  output.print(strprintf("world: %d rank(s) on %d node(s), %d per node | backend %s | %lld thread(s) per rank", world,
                         w.node_count, w.local_size, comm.backend_name().c_str(), static_cast<long long>(threads)));

  // Data: the whole text is tokenized by characters; its last val-fraction is held out.
  const std::string data_spec = v["data"].as<std::string>();
  const std::string text = is_builtin_dataset(data_spec) ? builtin_dataset_text(data_spec) : read_text_file(data_spec);
  const CharTokenizer tokenizer = CharTokenizer::from_text(text);
  auto [train_ids, val_ids] = split_train_val(tokenizer.encode(text), v["val-fraction"].as<double>());

  const GptConfig model_config = model_config_from(v, tokenizer.vocab_size());
  TrainOptions options = train_options_from(v, model_config);
  if (train_ids.empty()) throw std::invalid_argument("the training split of '" + data_spec + "' is empty");
  auto train_tokens = std::make_shared<InMemoryTokens>(std::move(train_ids));
  auto train_loader = make_train_loader(v["data-order"].as<std::string>(), train_tokens, options, rank, world);
  std::unique_ptr<ShardedBatchLoader> val_loader;
  if (val_ids.size() > static_cast<size_t>(options.batch_size * options.seq_len)) {
    val_loader = std::make_unique<ShardedBatchLoader>(std::make_shared<InMemoryTokens>(std::move(val_ids)),
                                                      options.batch_size, options.seq_len, rank, world);
  } else if (options.eval_every > 0) {
    output.print("note: the validation split is shorter than one batch; validation is off");
  }

  seed_everything(options.seed);
  Gpt model(model_config);
  model->to(device);
  broadcast_model_state(*model, comm);  // every rank starts from rank 0's weights
  AdamW optimizer(model->decay_parameters(), model->no_decay_parameters(),
                  AdamWOptions{options.lr, 0.9, 0.95, 1e-8, options.weight_decay});

  output.print(strprintf("data: %s | %zu characters | vocab %lld | train %llu tokens", data_spec.c_str(), text.size(),
                         static_cast<long long>(tokenizer.vocab_size()),
                         static_cast<unsigned long long>(train_tokens->size())));
  output.print(strprintf("model: %lld layers, %lld heads, %lld wide, block %lld | %lld parameters",
                         static_cast<long long>(model_config.n_layer), static_cast<long long>(model_config.n_head),
                         static_cast<long long>(model_config.n_embd), static_cast<long long>(model_config.block_size),
                         static_cast<long long>(model->num_parameters())));
  output.print(strprintf("batch: %lld x %lld tokens x %lld accumulation x %d ranks = %lld tokens per step",
                         static_cast<long long>(options.batch_size), static_cast<long long>(options.seq_len),
                         static_cast<long long>(options.grad_accum), world,
                         static_cast<long long>(options.batch_size * options.seq_len * options.grad_accum * world)));
  output.open_metrics(/*append=*/false);

  CheckpointMeta meta{model_config, "char", tokenizer.vocabulary(), 0, options.to_text()};
  Trainer trainer(model, optimizer, *train_loader, val_loader.get(), comm, output, options, device, meta);
  const TrainSummary summary = trainer.run(0);
  output.print(strprintf("done: loss %.4f -> %.4f over %lld steps", summary.first_loss, summary.last_loss,
                         static_cast<long long>(summary.steps_run)));
  return 0;
}

}  // namespace mygpt
