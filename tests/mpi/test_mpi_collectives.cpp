// Multi-rank tests, run under `mpirun -np 2` and `-np 3` (the MPI communicator) and under
// `torchrun --nproc-per-node 2` and `3` (the Gloo communicator over a c10d store rendezvous, which also
// proves that our view of c10d::ProcessGroupGloo matches libtorch's): every collective the trainer uses,
// DDP gradient bucketing and overlap against a plain per-tensor all-reduce, the start-up weight
// broadcast, sharded data coverage and the cross-rank configuration check. Tests of what only MPI
// promises (rank-order sums, its thread modes) skip under Gloo.
//
// Every rank runs every test in the same order, so the collectives inside them pair up. Tests use
// EXPECT_* only (never ASSERT_*) and issue their collectives unconditionally: a failing check on one
// rank must not make it skip a collective that the others wait in. The exit status is agreed by all
// ranks (see main), so mpirun fails whenever any rank saw a failure.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dataloader/batch_loader.h"
#include "dataloader/token_source.h"
#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "distributed/job_communicators.h"
#include "distributed/mpi_communicator.h"
#include "distributed/job_session.h"
#include "model/gpt.h"
#include "tests/mpi/rank_failure_printer.h"
#include "tests/test_support.h"

namespace mygpt {
namespace {

// Set by main before the tests run; outlived by nothing the tests create.
Communicator* g_comm = nullptr;
const WorldInfo* g_world = nullptr;

Communicator& comm() { return *g_comm; }
int rank() { return g_comm->rank(); }
int world() { return g_comm->world_size(); }
bool under_mpi() { return g_world->uses_mpi; }

// The largest value of x over all ranks.
double max_over_ranks(double x) {
  auto t = torch::tensor({x}, torch::kDouble);
  comm().all_reduce(t, ReduceOp::Max);
  return t.item<double>();
}

// ---------------------------------------------------------------------------------------------------
// The world and the MPI communicator

TEST(MpiWorld, DescribesTheJob) {
  if (!under_mpi()) {
    EXPECT_EQ(g_world->launcher, Launcher::torchrun);
    EXPECT_EQ(comm().rank(), g_world->rank);
    EXPECT_EQ(comm().world_size(), g_world->world_size);
    EXPECT_GE(world(), 2) << "run this executable under torchrun --nproc-per-node 2 or more";
    EXPECT_EQ(comm().backend_name(), "gloo");
    return;
  }
  int mpi_rank = -1, mpi_size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  EXPECT_TRUE(g_world->uses_mpi);
  EXPECT_EQ(g_world->rank, mpi_rank);
  EXPECT_EQ(g_world->world_size, mpi_size);
  EXPECT_GE(mpi_size, 2) << "run this executable under mpirun -np 2 or more";
  // One machine: every rank shares the node.
  EXPECT_EQ(g_world->node_count, 1);
  EXPECT_EQ(g_world->local_size, mpi_size);
  EXPECT_EQ(g_world->local_rank, mpi_rank);
  EXPECT_EQ(comm().rank(), mpi_rank);
  EXPECT_EQ(comm().world_size(), mpi_size);
  EXPECT_EQ(comm().backend_name(), "mpi");
}

// Rank r holds (r + 1) * (i + 1) at index i, so sum, average and max have closed forms.
void check_all_reduce(torch::ScalarType dtype) {
  const int64_t n = 37;
  const double w = world();
  const double rank_sum = w * (w + 1) / 2;  // sum of (r + 1) over ranks
  const auto index = torch::arange(1, n + 1, torch::kDouble);
  const auto mine = (index * (rank() + 1)).to(dtype);

  auto sum = mine.clone();
  comm().all_reduce(sum, ReduceOp::Sum);
  EXPECT_EQ(sum.scalar_type(), dtype);
  EXPECT_TRUE(torch::equal(sum, (index * rank_sum).to(dtype))) << sum;

  auto max = mine.clone();
  comm().all_reduce(max, ReduceOp::Max);
  EXPECT_TRUE(torch::equal(max, (index * w).to(dtype))) << max;

  // w * (r + 1) * (i + 1) sums to w * rank_sum * (i + 1): its average, rank_sum * (i + 1), is exact
  // in every type, integers included.
  auto average = (mine * world()).to(dtype);
  comm().all_reduce(average, ReduceOp::Average);
  EXPECT_EQ(average.scalar_type(), dtype);
  EXPECT_TRUE(torch::equal(average, (index * rank_sum).to(dtype))) << average;
}

TEST(MpiCommunicator, AllReduceFloat) { check_all_reduce(torch::kFloat); }
TEST(MpiCommunicator, AllReduceDouble) { check_all_reduce(torch::kDouble); }
TEST(MpiCommunicator, AllReduceInt64) {
  try {
    check_all_reduce(torch::kLong);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "all_reduce on int64 threw: " << e.what();
  }
}

TEST(MpiCommunicator, AverageOfFloatsDividesByWorldSize) {
  // Rank r contributes r: the average is (w - 1) / 2, not an integer for w = 2.
  auto t = torch::full({5}, static_cast<float>(rank()));
  comm().all_reduce(t, ReduceOp::Average);
  EXPECT_TRUE(torch::allclose(t, torch::full({5}, (world() - 1) / 2.0f))) << t;
}

TEST(MpiCommunicator, AsyncAllReducesCompleteInAnyWaitOrder) {
  // Several operations in flight at once, on tensors of different sizes and types.
  std::vector<torch::Tensor> tensors = {torch::full({3}, rank() + 1.0f), torch::full({1000}, rank() + 1.0),
                                        torch::full({7}, static_cast<int64_t>(rank() + 1), torch::kLong)};
  std::vector<std::unique_ptr<PendingCollective>> pending;
  pending.push_back(comm().all_reduce_async(tensors[0], ReduceOp::Sum));
  pending.push_back(comm().all_reduce_async(tensors[1], ReduceOp::Max));
  pending.push_back(comm().all_reduce_async(tensors[2], ReduceOp::Sum));
  // Waiting in reverse order is allowed: each handle waits for its own operation only.
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) (*it)->wait();
  const double w = world();
  EXPECT_TRUE(torch::equal(tensors[0], torch::full({3}, static_cast<float>(w * (w + 1) / 2)))) << tensors[0];
  EXPECT_TRUE(torch::equal(tensors[1], torch::full({1000}, w)));
  EXPECT_TRUE(torch::equal(tensors[2], torch::full({7}, static_cast<int64_t>(w * (w + 1) / 2), torch::kLong)));
}

TEST(MpiCommunicator, AsyncAllReduceWritesIntoTheCallersTensor) {
  // all_reduce_async takes the tensor by value; the result must still land in the caller's storage.
  auto t = torch::ones({4, 4});
  auto view = t.view({16});
  comm().all_reduce_async(view, ReduceOp::Sum)->wait();
  EXPECT_TRUE(torch::equal(t, torch::full({4, 4}, static_cast<float>(world()))));
}

TEST(MpiCommunicator, BroadcastFromEveryRoot) {
  for (int root = 0; root < world(); ++root) {
    auto f = torch::full({2, 3}, static_cast<float>(rank() * 10 + 1));
    auto l = torch::full({4}, static_cast<int64_t>(rank() - 100), torch::kLong);
    comm().broadcast(f, root);
    comm().broadcast(l, root);
    EXPECT_TRUE(torch::equal(f, torch::full({2, 3}, static_cast<float>(root * 10 + 1)))) << "root " << root;
    EXPECT_TRUE(torch::equal(l, torch::full({4}, static_cast<int64_t>(root - 100), torch::kLong))) << "root " << root;
  }
}

TEST(MpiCommunicator, BarrierWaitsForTheSlowestRank) {
  comm().barrier();  // line the ranks up
  constexpr auto kDelay = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  if (rank() == 0) std::this_thread::sleep_for(kDelay);
  comm().barrier();
  const auto waited = std::chrono::steady_clock::now() - start;
  // Every other rank was held in the barrier until rank 0 arrived (less what the first barrier's
  // exits differed by, which is far below 150 ms).
  EXPECT_GE(waited, std::chrono::milliseconds(150)) << "rank " << rank() << " left the barrier early";
}

TEST(MpiCommunicator, ListAllReducePacksAndUnpacks) {
  std::vector<torch::Tensor> tensors = {torch::full({2, 3}, rank() + 1.0f),
                                        torch::arange(5, torch::kFloat) * (rank() + 1), torch::full({1}, 1.0f)};
  comm().all_reduce(tensors, ReduceOp::Sum);
  const float rank_sum = world() * (world() + 1) / 2.0f;
  EXPECT_EQ(tensors[0].sizes(), torch::IntArrayRef({2, 3}));
  EXPECT_TRUE(torch::equal(tensors[0], torch::full({2, 3}, rank_sum)));
  EXPECT_TRUE(torch::equal(tensors[1], torch::arange(5, torch::kFloat) * rank_sum));
  EXPECT_TRUE(torch::equal(tensors[2], torch::full({1}, static_cast<float>(world()))));

  std::vector<torch::Tensor> averaged = {torch::full({3}, static_cast<double>(rank())),
                                         torch::full({2, 2}, 2.0 * rank())};
  comm().all_reduce(averaged, ReduceOp::Average);
  const double mean_rank = (world() - 1) / 2.0;
  EXPECT_TRUE(torch::allclose(averaged[0], torch::full({3}, mean_rank)));
  EXPECT_TRUE(torch::allclose(averaged[1], torch::full({2, 2}, 2 * mean_rank)));
}

TEST(MpiCommunicator, GatherRowsGivesEveryRankEveryRow) {
  // RNG states (bytes) and positions (int64) are what ranks gather.
  const auto mine = torch::arange(4, torch::kLong) + 100 * rank();
  const auto rows = comm().gather_rows(mine);
  auto bytes = torch::full({3}, static_cast<int64_t>(250 - rank()), torch::kLong).to(torch::kByte);
  const auto byte_rows = comm().gather_rows(bytes);
  EXPECT_EQ(rows.sizes(), torch::IntArrayRef({world(), 4}));
  EXPECT_EQ(byte_rows.scalar_type(), torch::kByte);
  for (int r = 0; r < world(); ++r) {
    EXPECT_TRUE(torch::equal(rows[r], torch::arange(4, torch::kLong) + 100 * r)) << rows;
    EXPECT_TRUE(torch::equal(byte_rows[r], torch::full({3}, 250 - r, torch::kLong).to(torch::kByte))) << byte_rows;
  }
}

// Checkpoints stream sharded state through gather_to_root: pieces of different lengths (rank 1's empty),
// floats and bytes, to the first and to the last rank; only the root gets the result. Through the base
// class as well (its broadcasts in turn), which Gloo and NCCL use.
TEST(MpiCommunicator, GatherToRootConcatenatesThePiecesInRankOrder) {
  for (const bool base : {false, true}) {
    for (const int root : {0, world() - 1}) {
      const int64_t length = rank() == 1 ? 0 : rank() + 2;
      const auto floats = torch::arange(length, torch::kFloat) + 100 * rank();
      const auto bytes = (torch::arange(length, torch::kLong) + 7 * rank()).to(torch::kByte).view({-1, 1});
      const torch::Tensor got = base ? comm().Communicator::gather_to_root(floats, root)
                                     : comm().gather_to_root(floats, root);
      const torch::Tensor got_bytes = base ? comm().Communicator::gather_to_root(bytes, root)
                                           : comm().gather_to_root(bytes, root);
      if (rank() != root) {
        EXPECT_FALSE(got.defined());
        continue;
      }
      std::vector<torch::Tensor> expected, expected_bytes;
      for (int r = 0; r < world(); ++r) {
        const int64_t n = r == 1 ? 0 : r + 2;
        expected.push_back(torch::arange(n, torch::kFloat) + 100 * r);
        expected_bytes.push_back((torch::arange(n, torch::kLong) + 7 * r).to(torch::kByte));
      }
      EXPECT_TRUE(torch::equal(got, torch::cat(expected))) << "root " << root << (base ? " (base)" : "") << got;
      EXPECT_TRUE(torch::equal(got_bytes, torch::cat(expected_bytes))) << got_bytes;
    }
  }
}

TEST(MpiCommunicator, ReduceScatterLeavesEachRankItsReducedChunk) {
  const int64_t n = world() * 5;
  auto floats = (torch::arange(n, torch::kFloat) + 1) * (rank() + 1);
  auto longs = (torch::arange(n, torch::kLong) + 1) * (rank() + 1);
  comm().reduce_scatter_async(floats, ReduceOp::Sum)->wait();
  comm().reduce_scatter_async(longs, ReduceOp::Average)->wait();
  const double rank_sum = world() * (world() + 1) / 2.0;
  EXPECT_TRUE(torch::equal(comm().chunk_of(floats), comm().chunk_of((torch::arange(n, torch::kFloat) + 1) * rank_sum)))
      << floats;
  EXPECT_TRUE(torch::equal(comm().chunk_of(longs),
                           comm().chunk_of(((torch::arange(n, torch::kLong) + 1) * static_cast<int64_t>(rank_sum))
                                               .div(world(), "trunc"))))
      << longs;
}

TEST(MpiCommunicator, AllGatherGivesEveryRankEveryChunk) {
  const int64_t chunk = 4;
  auto full = torch::full({world() * chunk}, -1.0f);
  comm().chunk_of(full).fill_(static_cast<float>(rank()));
  comm().all_gather_async(full)->wait();
  EXPECT_TRUE(torch::equal(full, torch::arange(world(), torch::kFloat).repeat_interleave(chunk))) << full;
  EXPECT_THROW(comm().all_gather_async(torch::zeros({world() * chunk + 1})), std::logic_error);
}

// Float sums are added in rank order whichever collective carries them and whatever the size, so
// all-reduce (--zero 0) and reduce-scatter (--zero 1) of a gradient bucket agree bit for bit.
TEST(MpiCommunicator, FloatSumsAreTheSameBitsInEveryCollective) {
  if (!under_mpi()) GTEST_SKIP() << "rank-order sums are the MPI backend's promise";
  torch::manual_seed(7 + rank());
  const auto data = torch::randn({world() * 3000});
  auto reduced = data.clone();
  comm().all_reduce(reduced, ReduceOp::Average);
  auto scattered = data.clone();
  comm().reduce_scatter_async(scattered, ReduceOp::Average)->wait();
  EXPECT_TRUE(torch::equal(comm().chunk_of(reduced), comm().chunk_of(scattered)));
  auto piece = data.slice(0, 10, 17).clone();  // a lone small tensor
  comm().all_reduce(piece, ReduceOp::Average);
  EXPECT_TRUE(torch::equal(piece, reduced.slice(0, 10, 17)));
  const torch::Tensor rows = comm().gather_rows(data);
  auto expected = rows[0].clone();
  for (int r = 1; r < world(); ++r) expected.add_(rows[r]);
  EXPECT_TRUE(torch::equal(reduced, expected.div_(world())));
}

TEST(MpiCommunicator, RejectsTensorsItCannotSend) {
  // Every rank rejects alike, so no rank is left waiting in a collective.
  if (under_mpi()) {  // Gloo reduces half floats
    auto half = torch::ones({4}, torch::kHalf);
    EXPECT_THROW(comm().all_reduce(half, ReduceOp::Sum), std::logic_error);
  }
  auto strided = torch::ones({4, 4}).t();
  EXPECT_THROW(comm().all_reduce(strided, ReduceOp::Sum), std::logic_error);
  // The communicator still works afterwards.
  auto ok = torch::ones({2});
  comm().all_reduce(ok, ReduceOp::Sum);
  EXPECT_TRUE(torch::equal(ok, torch::full({2}, static_cast<float>(world()))));
}

TEST(MpiCommunicator, SynchronousModeWithoutACommunicationThread) {
  if (!under_mpi()) GTEST_SKIP() << "an MPI mode";
  MpiCommunicator direct(MPI_COMM_WORLD, /*use_thread=*/false);
  auto t = torch::full({3}, rank() + 1.0);
  direct.all_reduce_async(t, ReduceOp::Sum)->wait();
  EXPECT_TRUE(torch::equal(t, torch::full({3}, world() * (world() + 1) / 2.0)));
  direct.barrier();
}

// ---------------------------------------------------------------------------------------------------
// DDP gradient synchronization

GptConfig tiny_model_config() { return testing::small_config(16, 16); }

// Runs `micro_steps` forward/backward passes on rank-specific data with a GradientSynchronizer, then
// checks that every gradient equals the per-parameter all-reduce average of the local gradient that a
// twin model without synchronization computed from the same data (the synchronizer's gradients are
// views into buckets that are reduced in place, during backward).
// Two optimizer steps reuse the synchronizer, so its reset between steps is covered too.
struct SyncOutcome {
  GradientSyncStats stats;
  size_t params = 0;
};

SyncOutcome check_gradient_sync(size_t bucket_bytes, bool overlap, int micro_steps) {
  torch::manual_seed(42);  // the same weights on every rank, in both models
  Gpt model(tiny_model_config());
  torch::manual_seed(42);
  Gpt reference_model(tiny_model_config());  // the same passes without synchronization: local gradients
  const auto params = model->parameters(), reference_params = reference_model->parameters();
  GradientSynchronizer sync(params, comm(), bucket_bytes, overlap);
  SyncOutcome outcome;
  outcome.params = params.size();
  for (int step = 0; step < 2; ++step) {
    sync.zero_grad();
    reference_model->zero_grad();
    for (int micro = 0; micro < micro_steps; ++micro) {
      torch::manual_seed(1000 * step + 100 * micro + rank());  // different data on every rank
      auto x = torch::randint(16, {3, 16}, torch::kLong);
      auto y = torch::randint(16, {3, 16}, torch::kLong);
      sync.begin_micro_step(micro == micro_steps - 1);
      (model->loss(x, y) / static_cast<double>(micro_steps)).backward();
      (reference_model->loss(x, y) / static_cast<double>(micro_steps)).backward();
    }
    sync.finish();

    double spread = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      const auto local = reference_params[k].grad();
      auto reference = local.clone();
      comm().all_reduce(reference, ReduceOp::Average);  // one tensor at a time: no buckets involved
      if (under_mpi()) {
        // Float sums are added in rank order whatever the message (MpiCommunicator), so a bucket's
        // reduction equals a lone tensor's bit for bit, for any number of ranks.
        EXPECT_TRUE(torch::equal(params[k].grad(), reference))
            << "parameter " << k << ", bucket_bytes " << bucket_bytes << ", overlap " << overlap;
      } else {
        // Gloo's ring adds in an order that depends on where an element sits in the message: two orders
        // of w fp32 terms differ by at most 2 (w - 1) eps times the sum of their magnitudes (/ w here).
        auto magnitude = local.abs();
        comm().all_reduce(magnitude, ReduceOp::Average);
        const double eps = std::numeric_limits<float>::epsilon();
        const auto bound = magnitude * (2.0 * (world() - 1) * eps) + 1e-30;
        EXPECT_TRUE(((params[k].grad() - reference).abs() <= bound).all().item<bool>())
            << "parameter " << k << ", bucket_bytes " << bucket_bytes << ", overlap " << overlap;
      }
      spread = std::max(spread, (local - reference).abs().max().item<double>());
    }
    // The ranks really did differ before the sync, so the comparison above means something.
    EXPECT_GT(max_over_ranks(spread), 1e-6) << "every rank had the same gradients: the test data is not rank-specific";
    outcome.stats = sync.last_stats();
  }
  return outcome;
}

class GradientBucketing : public ::testing::TestWithParam<bool> {};

TEST_P(GradientBucketing, BucketsSmallerThanOneTensor) {
  const auto outcome = check_gradient_sync(/*bucket_bytes=*/1, /*overlap=*/GetParam(), /*micro_steps=*/1);
  EXPECT_EQ(outcome.stats.buckets, static_cast<int64_t>(outcome.params));  // one tensor per bucket
}

TEST_P(GradientBucketing, MediumBuckets) {
  torch::manual_seed(42);
  Gpt probe(tiny_model_config());
  size_t total = 0;
  for (const auto& p : probe->parameters()) total += static_cast<size_t>(p.numel()) * p.element_size();
  const auto outcome = check_gradient_sync(total / 4, GetParam(), /*micro_steps=*/2);
  EXPECT_GT(outcome.stats.buckets, 2);
  EXPECT_LT(outcome.stats.buckets, static_cast<int64_t>(outcome.params));
}

TEST_P(GradientBucketing, OneBucketLargerThanAllTensors) {
  const auto outcome = check_gradient_sync(/*bucket_bytes=*/1u << 30, GetParam(), /*micro_steps=*/3);
  EXPECT_EQ(outcome.stats.buckets, 1);
}

INSTANTIATE_TEST_SUITE_P(Overlap, GradientBucketing, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "On" : "Off"; });

TEST(GradientOverlap, BucketsStartDuringBackwardOnlyWithOverlap) {
  const auto with_overlap = check_gradient_sync(/*bucket_bytes=*/4096, /*overlap=*/true, /*micro_steps=*/2);
  EXPECT_GT(with_overlap.stats.buckets, 1);
  EXPECT_GT(with_overlap.stats.buckets_launched_in_backward, 0);
  EXPECT_LE(with_overlap.stats.buckets_launched_in_backward, with_overlap.stats.buckets);

  const auto without = check_gradient_sync(/*bucket_bytes=*/4096, /*overlap=*/false, /*micro_steps=*/2);
  EXPECT_GT(without.stats.buckets, 1);
  EXPECT_EQ(without.stats.buckets_launched_in_backward, 0);
}

// Whether `actual` holds the all-reduced values of `expected`: bit for bit under MPI (rank-order sums);
// under Gloo, whose ring adds in an order that depends on an element's place in the message, within the
// rounding of two orders of w fp32 terms, bounded by the scale of the whole tensor (`whole`).
bool same_sums(const torch::Tensor& actual, const torch::Tensor& expected, const torch::Tensor& whole) {
  if (under_mpi()) return torch::equal(actual, expected);
  const double bound = 2.0 * world() * std::numeric_limits<float>::epsilon() * whole.abs().max().item<double>();
  return ((actual - expected).abs() <= bound).all().item<bool>();
}

// Sharded (--zero 1): each rank's chunk of every bucket holds exactly the unsharded synchronizer's
// gradients there, and the chunks of all ranks cover every parameter once.
TEST(GradientSharding, EachRanksChunkHoldsTheAverage) {
  for (const size_t bucket_bytes : {size_t{1}, size_t{4096}, size_t{1} << 30}) {
    torch::manual_seed(42);
    Gpt plain_model(tiny_model_config());
    torch::manual_seed(42);
    Gpt sharded_model(tiny_model_config());
    const auto plain_params = plain_model->parameters();
    GradientSynchronizer plain(plain_params, comm(), bucket_bytes, true);
    GradientSynchronizer sharded(sharded_model->parameters(), comm(), bucket_bytes, true, GradientSharding::reduce_scatter);
    plain.zero_grad();
    sharded.zero_grad();
    torch::manual_seed(100 + rank());
    auto x = torch::randint(16, {3, 16}, torch::kLong);
    auto y = torch::randint(16, {3, 16}, torch::kLong);
    plain.begin_micro_step(true);
    sharded.begin_micro_step(true);
    plain_model->loss(x, y).backward();
    sharded_model->loss(x, y).backward();
    plain.finish();
    sharded.finish();
    int64_t covered = 0, total = 0;
    for (const auto& p : plain_params) total += p.numel();
    for (size_t b = 0; b < sharded.layout().size(); ++b) {
      const BucketLayout& bucket = sharded.layout()[b];
      EXPECT_EQ(bucket.numel % (kShardAlignment * world()), 0);
      const int64_t chunk = bucket.numel / world(), lo = chunk * rank(), hi = lo + chunk;
      for (size_t i = 0; i < bucket.params.size(); ++i) {
        EXPECT_EQ(bucket.offsets[i] % kShardAlignment, 0);
        const auto& reference = plain_params[bucket.params[i]].grad().reshape({-1});
        const int64_t begin = std::max(lo, bucket.offsets[i]);
        const int64_t end = std::min(hi, bucket.offsets[i] + reference.numel());
        if (begin >= end) continue;
        covered += end - begin;
        EXPECT_TRUE(same_sums(sharded.bucket_gradients(b).slice(0, begin, end),
                              reference.slice(0, begin - bucket.offsets[i], end - bucket.offsets[i]), reference))
            << "bucket " << b << " parameter " << bucket.params[i] << ", bucket_bytes " << bucket_bytes;
      }
    }
    auto all_covered = torch::tensor({covered}, torch::kLong);
    comm().all_reduce(all_covered, ReduceOp::Sum);
    EXPECT_EQ(all_covered.item<int64_t>(), total) << "bucket_bytes " << bucket_bytes;
  }
}

// ---------------------------------------------------------------------------------------------------
// Start-up weight broadcast

torch::Tensor flat_parameters(Gpt& model) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.detach().reshape({-1}));
  return torch::cat(flat);
}

// The largest |mine - rank 0's| over all ranks.
double max_difference_from_rank0(const torch::Tensor& mine) {
  auto rank0 = mine.clone();
  comm().broadcast(rank0, 0);
  return max_over_ranks((mine - rank0).abs().max().item<double>());
}

TEST(BroadcastModelState, RanksSeededDifferentlyEndIdentical) {
  torch::manual_seed(7000 + rank());
  Gpt model(tiny_model_config());
  const auto before = flat_parameters(model).clone();
  EXPECT_GT(max_difference_from_rank0(before), 1e-3) << "differently seeded ranks drew the same weights";

  broadcast_model_state(*model, comm());

  const auto after = flat_parameters(model);
  EXPECT_EQ(max_difference_from_rank0(after), 0.0);
  if (rank() == 0) {
    EXPECT_TRUE(torch::equal(after, before)) << "rank 0's own weights changed";
  }
  // Parameters still require gradients and still train: the broadcast wrote through, not around them.
  for (const auto& p : model->parameters()) EXPECT_TRUE(p.requires_grad());
}

// ---------------------------------------------------------------------------------------------------
// Sharded data

TEST(ShardedBatchLoader, RanksReadDisjointChunksCoveringTheStream) {
  constexpr int64_t kBatch = 2, kSeq = 4, kChunk = kBatch * kSeq;
  constexpr int64_t kChunks = 12;  // divisible by 2 and 3: each rank reads the same number per epoch
  constexpr int64_t kTokens = kChunks * kChunk;
  std::vector<int64_t> positions(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) positions[i] = i;  // every token is its own position
  auto source = std::make_shared<InMemoryTokens>(positions);
  ShardedBatchLoader loader(source, kBatch, kSeq, rank(), world());
  EXPECT_EQ(loader.chunks_per_epoch(), static_cast<uint64_t>(kChunks));

  constexpr int kEpochs = 2;
  auto counts = torch::zeros({kTokens}, torch::kLong);
  const int64_t reads = kEpochs * kChunks / world();
  for (int64_t i = 0; i < reads; ++i) {
    const Batch b = loader.next(torch::kCPU);
    const auto x = b.x.reshape({-1}).contiguous();
    const int64_t first = x[0].item<int64_t>();
    // A chunk is B*T consecutive tokens, starting on a chunk boundary; y is x shifted by one (cyclic).
    EXPECT_EQ(first % kChunk, 0);
    EXPECT_TRUE(torch::equal(x, torch::arange(first, first + kChunk, torch::kLong))) << "read " << i;
    EXPECT_TRUE(torch::equal(b.y.reshape({-1}), (x + 1).remainder(kTokens))) << "read " << i;
    counts.index_add_(0, x, torch::ones({kChunk}, torch::kLong));
  }
  EXPECT_EQ(loader.position(), static_cast<uint64_t>(kEpochs * kChunks));
  comm().all_reduce(counts, ReduceOp::Sum);
  // Disjoint and covering: over two epochs every token was read exactly twice, by all ranks together.
  EXPECT_TRUE(torch::equal(counts, torch::full({kTokens}, static_cast<int64_t>(kEpochs), torch::kLong)))
      << "token read counts: " << counts;
}

// ---------------------------------------------------------------------------------------------------
// The configuration check at start-up

TEST(RequireSameConfig, PassesWhenEveryRankAgrees) {
  EXPECT_NO_THROW(require_same_config_on_all_ranks(comm(), "lr=0.001\nsteps=20\n"));
  EXPECT_NO_THROW(require_same_config_on_all_ranks(comm(), ""));
}

TEST(RequireSameConfig, EveryRankThrowsWhenOneDiffers) {
  for (int odd_one = 0; odd_one < world(); ++odd_one) {
    const std::string text = rank() == odd_one ? "lr=0.002\nsteps=20\n" : "lr=0.001\nsteps=20\n";
    try {
      require_same_config_on_all_ranks(comm(), text);
      ADD_FAILURE() << "rank " << rank() << " accepted a configuration that rank " << odd_one << " does not share";
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("different configurations"), std::string::npos) << message;
      // A rank whose options are not rank 0's names the first that differs, with both values.
      const bool differs_from_rank0 = rank() != 0 && (rank() == odd_one || odd_one == 0);
      if (differs_from_rank0) {
        const std::string mine = rank() == odd_one ? "0.002" : "0.001", theirs = odd_one == 0 ? "0.002" : "0.001";
        EXPECT_NE(message.find("--lr is '" + mine + "' on this rank, '" + theirs + "' on rank 0"), std::string::npos)
            << message;
      } else {
        EXPECT_NE(message.find("another rank's differ"), std::string::npos) << message;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------


}  // namespace
}  // namespace mygpt

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mygpt::JobSession job;
  if (!job.world().uses_mpi && !job.launch().uses_store()) {
    std::cerr << "mygpt_mpi_tests: start me under mpirun (mpirun -np 2 " << argv[0]
              << ") or torchrun (torchrun --nproc-per-node 2 --no-python " << argv[0] << ")" << std::endl;
    return 1;
  }
  torch::set_num_threads(1);
  const int rank = job.world().rank;
  mygpt::print_only_failures_off_rank_zero(rank);
  int any_failed = 0;
  {
    // Destroyed (threads joined, communicators freed) before JobSession finalizes MPI.
    std::unique_ptr<mygpt::MpiCommunicator> mpi;
    std::unique_ptr<mygpt::JobCommunicators> store_job;
    if (job.world().uses_mpi) {
      mpi = std::make_unique<mygpt::MpiCommunicator>(MPI_COMM_WORLD, job.thread_serialized());
      mygpt::g_comm = mpi.get();
    } else {
      store_job = std::make_unique<mygpt::JobCommunicators>(job, torch::kCPU, /*timeout_seconds=*/120, "tcp");
      mygpt::g_comm = &store_job->host();
    }
    mygpt::g_world = &job.world();
    const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    // All ranks agree on the outcome: a failure on any rank fails the job on every rank.
    auto outcome = torch::tensor({failed}, torch::kLong);
    mygpt::g_comm->all_reduce(outcome, mygpt::ReduceOp::Max);
    any_failed = static_cast<int>(outcome.item<int64_t>());
    if (rank == 0 && any_failed && !failed) std::cerr << "rank 0 passed, but another rank failed (see its lines above)\n";
    mygpt::g_comm = nullptr;
  }
  return any_failed;
}
