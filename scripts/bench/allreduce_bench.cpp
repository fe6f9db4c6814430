// mygpt_allreduce_bench: bandwidth of our gradient all-reduce on N MPI ranks, as training uses it.
//
//   mpirun -np 2 build/bench/mygpt_allreduce_bench [--preset gpt2] [--bucket-mb 25[,100,...]] [--reps 10]
//
// Variants, each timed over --reps repetitions after --warmup untimed ones:
//   ddp-buckets  GradientSynchronizer over the model's parameters (gradients filled with random values):
//                every bucket started, then finish() -- the copies into the buckets, the in-order
//                all-reduces on the communication thread, the averaging and the copies back.
//   flat         MpiCommunicator::all_reduce(Average) on one flat float tensor of the same bytes.
//   raw          MPI_Allreduce(SUM) on the same bytes, called from this thread: the floor under both.
// A repetition's time is the slowest rank's (ranks start together after a barrier); the table shows
// the median. Algorithm bandwidth = bytes / time; bus bandwidth = algbw x 2(n-1)/n, the traffic per
// link of a ring all-reduce (nccl-tests' convention), which compares across rank counts. GB = 1e9 B.
//
// Rank 0 prints a markdown table and, last, one `RESULT {json}` line per variant for scripts.
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed/gradient_sync.h"
#include "distributed/mpi_communicator.h"
#include "distributed/job_session.h"
#include "model/gpt.h"
#include "model/gpt_config.h"

namespace {

struct Options {
  std::string preset = "gpt2";
  std::vector<double> bucket_mb = {25.0};
  int reps = 10;
  int warmup = 2;
  int threads = 0;  // 0: the node's cores divided by its ranks, as `mygpt-ddp train` does
};

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    const double v = std::stod(item, &used);
    if (used != item.size() || !(v > 0))
      throw std::invalid_argument("--bucket-mb wants positive numbers, got '" + text + "'");
    values.push_back(v);
  }
  if (values.empty()) throw std::invalid_argument("--bucket-mb is empty");
  return values;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << "usage: mpirun -np N mygpt_allreduce_bench [--preset gpt2] [--bucket-mb 25[,MB...]] [--reps 10]\n"
                   "                                        [--warmup 2] [--threads 0]\n";
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--preset")
      o.preset = value;
    else if (flag == "--bucket-mb")
      o.bucket_mb = parse_list(value);
    else if (flag == "--reps")
      o.reps = std::stoi(value);
    else if (flag == "--warmup")
      o.warmup = std::stoi(value);
    else if (flag == "--threads")
      o.threads = std::stoi(value);
    else
      throw std::invalid_argument("unknown option " + flag);
  }
  if (o.reps <= 0 || o.warmup < 0 || o.threads < 0)
    throw std::invalid_argument("--reps > 0, --warmup >= 0, --threads >= 0");
  return o;
}

struct Timing {
  std::string variant;
  int64_t buckets = 1;
  double bucket_mb = 0;         // requested bucket size; 0 for the flat variants
  std::vector<double> seconds;  // slowest rank's time per repetition
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string join(const std::vector<double>& values) {
  std::string text;
  char item[32];
  for (double v : values) {
    std::snprintf(item, sizeof item, "%s%.6f", text.empty() ? "" : ", ", v);
    text += item;
  }
  return text;
}

// Times `call` on every rank, started together; returns the slowest rank's seconds per repetition.
std::vector<double> time_collective(mygpt::MpiCommunicator& comm, const Options& o, const std::function<void()>& call) {
  std::vector<double> seconds;
  for (int r = 0; r < o.warmup + o.reps; ++r) {
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    call();
    auto elapsed = torch::tensor({std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
                                 torch::kDouble);
    comm.all_reduce(elapsed, mygpt::ReduceOp::Max);
    if (r >= o.warmup) seconds.push_back(elapsed.item<double>());
  }
  return seconds;
}

// After an averaging all-reduce every rank must hold the same values: the largest and the smallest
// checksum over the ranks must be equal.
void require_identical_across_ranks(mygpt::MpiCommunicator& comm, const std::vector<torch::Tensor>& tensors,
                                    const std::string& what) {
  double sum = 0;
  for (const auto& t : tensors) sum += t.to(torch::kDouble).sum().item<double>();
  auto mine = torch::tensor({sum}, torch::kDouble);
  auto low = -mine;
  comm.all_reduce(low, mygpt::ReduceOp::Max);
  auto high = mine.clone();
  comm.all_reduce(high, mygpt::ReduceOp::Max);
  if (high.item<double>() != -low.item<double>()) throw std::runtime_error(what + ": ranks disagree after all-reduce");
}

int run(const mygpt::JobSession& mpi, const Options& o) {
  if (!mpi.world().uses_mpi) throw std::invalid_argument("start it under mpirun/srun (2 ranks or more)");
  const int world = mpi.world().world_size;
  const int rank = mpi.world().rank;
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / mpi.world().local_size);
  torch::set_num_threads(threads);
  mygpt::MpiCommunicator comm(MPI_COMM_WORLD, mpi.thread_serialized());

  // The model's parameters, with gradients of distinct random values per rank.
  mygpt::GptConfig config = mygpt::preset_config(o.preset);
  if (config.vocab_size <= 0) config.vocab_size = 65;  // character presets take the data's: tinyshakespeare's
  mygpt::Gpt model(config);
  std::vector<torch::Tensor> params = model->parameters();
  torch::manual_seed(1000 + rank);
  int64_t numel = 0;
  for (auto& p : params) {
    p.mutable_grad() = torch::randn_like(p);
    numel += p.numel();
  }
  const double bytes = static_cast<double>(numel) * sizeof(float);

  std::vector<Timing> timings;
  for (double mb : o.bucket_mb) {
    mygpt::GradientSynchronizer sync(params, comm, static_cast<size_t>(mb * (1 << 20)), /*overlap=*/true);
    auto seconds = time_collective(comm, o, [&] {
      sync.begin_micro_step(true);
      sync.finish();
    });
    std::vector<torch::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad());
    require_identical_across_ranks(comm, grads, "ddp-buckets");
    timings.push_back({"ddp-buckets", sync.last_stats().buckets, mb, std::move(seconds)});
  }
  // The gradients are no longer needed: free them before allocating the flat buffer.
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  auto flat = torch::randn({numel}, torch::kFloat);
  timings.push_back({"flat", 1, 0, time_collective(comm, o, [&] { comm.all_reduce(flat, mygpt::ReduceOp::Average); })});
  require_identical_across_ranks(comm, {flat}, "flat");

  // Our own duplicate of the world, used from this thread only while the communication thread is idle
  // (every call above has returned), which MPI_THREAD_SERIALIZED allows.
  MPI_Comm raw_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw_comm);
  timings.push_back({"raw", 1, 0, time_collective(comm, o, [&] {
                       if (MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr<float>(), static_cast<int>(numel), MPI_FLOAT,
                                         MPI_SUM, raw_comm) != MPI_SUCCESS) {
                         throw std::runtime_error("MPI_Allreduce failed");
                       }
                     })});
  MPI_Comm_free(&raw_comm);

  if (rank == 0) {
    const double bus_factor = 2.0 * (world - 1) / world;
    std::printf(
        "model %s: %lld parameters in %zu tensors, %.1f MiB of float32 gradients | %d ranks | %d thread(s) "
        "per rank | %d reps after %d warm-up\n\n",
        o.preset.c_str(), static_cast<long long>(numel), params.size(), bytes / (1 << 20), world, threads, o.reps,
        o.warmup);
    std::printf(
        "| variant | bucket MiB | buckets | median ms per call | min ms | max ms | algbw GB/s | busbw GB/s |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& t : timings) {
      const double med = median(t.seconds);
      const double lo = *std::min_element(t.seconds.begin(), t.seconds.end());
      const double hi = *std::max_element(t.seconds.begin(), t.seconds.end());
      char bucket[32] = "-";
      if (t.bucket_mb > 0) std::snprintf(bucket, sizeof bucket, "%g", t.bucket_mb);
      std::printf("| %s | %s | %lld | %.1f | %.1f | %.1f | %.2f | %.2f |\n", t.variant.c_str(), bucket,
                  static_cast<long long>(t.buckets), med * 1e3, lo * 1e3, hi * 1e3, bytes / med / 1e9,
                  bytes / med / 1e9 * bus_factor);
    }
    std::printf("\n");
    for (const auto& t : timings) {
      const double med = median(t.seconds);
      std::printf(
          "RESULT {\"variant\": \"%s\", \"bucket_mb\": %g, \"buckets\": %lld, \"bytes\": %.0f, \"ranks\": %d, "
          "\"threads\": %d, \"reps\": %d, \"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
          "\"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, \"seconds\": [%s]}\n",
          t.variant.c_str(), t.bucket_mb, static_cast<long long>(t.buckets), bytes, world, threads, o.reps, med,
          *std::min_element(t.seconds.begin(), t.seconds.end()), *std::max_element(t.seconds.begin(), t.seconds.end()),
          bytes / med / 1e9, bytes / med / 1e9 * bus_factor, join(t.seconds).c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<mygpt::JobSession> mpi;
  try {
    mpi = std::make_unique<mygpt::JobSession>();
    return run(*mpi, parse_options(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "mygpt_allreduce_bench: error: " << e.what() << std::endl;
    if (mpi) mpi->abort_job(1);  // brings every rank down, so none waits in a collective for this one
    return 1;
  }
}
