#pragma once
// How the ranks of a job started without MPI (torchrun, srun without MPI, plain variables) meet: through
// LibTorch's c10d store, which then carries the backends' own bootstrap (Gloo's addresses, NCCL's id via
// Gloo) and our start-up checks.
//   tcp (default)  c10d::TCPStore at MASTER_ADDR:MASTER_PORT, served by rank 0, or by torchrun's agent
//                  when TORCHELASTIC_USE_AGENT_STORE=True (then every rank is a client)
//   file:DIR       c10d::FileStore in a shared folder, for where no fixed port can be opened. Rank 0 claims
//                  DIR/mygpt-rendezvous (FolderClaim: a live earlier job there is refused, a dead one's
//                  claim taken over), creates a store file under a fresh random name and publishes that
//                  name in DIR/mygpt-rendezvous/current, whose mtime it refreshes until every rank has
//                  joined. Another rank takes the name only once the file's mtime is at least that of a
//                  probe it wrote itself after it started: a file left by an earlier job is never
//                  refreshed, so it is never taken (llm.c's file bootstrap read a stale id), and the file
//                  server stamps both times, so the hosts' clocks do not matter.
// Every rank claims its RANK and checks WORLD_SIZE against the others' in the store, then waits until all
// have joined; after --comm-timeout it fails naming how many came ("2 of 4 ranks joined ..."). A rank that
// cannot join leaves its line in the store's `failed` key (failure_notice.h), and the others stop with it.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "distributed/launch_environment.h"

namespace mygpt {

class FolderClaim;

// The value of --rendezvous: "tcp" or "file:DIR". Throws std::invalid_argument for anything else.
struct RendezvousMethod {
  std::string folder;  // empty: tcp
  static RendezvousMethod parse(const std::string& value);
};

// The keys of one job (and one torchrun attempt) in a store: "mygpt/job_<id>/attempt_<n>/". Two jobs
// that meet in one store by mistake (Slurm jobs whose derived ports coincide) never read each other's
// keys: a rank of the second waits under its own, where its rank 0 leaves why it could not serve.
std::string store_key_prefix(const LaunchEnvironment& launch);

class StoreRendezvous {
 public:
  // Joins the job's rendezvous. Throws std::invalid_argument for bad variables or flags (a port in use,
  // a host that does not resolve, a RANK claimed twice, WORLD_SIZE differing between ranks, a folder
  // held by a live job) and std::runtime_error when the ranks do not all come within `timeout`.
  StoreRendezvous(const LaunchEnvironment& launch, const RendezvousMethod& method, std::chrono::milliseconds timeout);
  ~StoreRendezvous();
  StoreRendezvous(const StoreRendezvous&) = delete;
  StoreRendezvous& operator=(const StoreRendezvous&) = delete;

  // This job's (and this torchrun attempt's) keys: a PrefixStore over the TCP or file store.
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  // "tcp://host:port" or "file:DIR", for messages.
  const std::string& where() const { return where_; }
  // Seconds from the start of the rendezvous until every rank had joined.
  double join_seconds() const { return join_seconds_; }

 private:
  void open_tcp(const LaunchEnvironment& launch, std::chrono::milliseconds timeout);
  void open_file(const LaunchEnvironment& launch, const std::string& folder, std::chrono::milliseconds timeout);
  void join(const LaunchEnvironment& launch);
  // Throws std::invalid_argument(why) after leaving `why` in the store for the ranks waiting in join().
  [[noreturn]] void refuse(const std::string& why, bool serves_store);
  // Rank 0 serving the store, before it leaves a refused job: until every rank that arrived has read why.
  void wait_until_every_rank_read() const;
  // One request to the store, given up at `deadline` with late_line(awaited) (bounded_call.h: c10d's
  // TCPStore reads most answers with no timeout).
  template <class T>
  T ask(const std::string& awaited, std::function<T(c10d::Store&)> request,
        std::chrono::steady_clock::time_point deadline) const;
  // "the rendezvous at tcp://h:p (from ...) sent no <awaited> within --comm-timeout 10 s".
  std::string late_line(const std::string& awaited) const;

  c10::intrusive_ptr<c10d::Store> base_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::string where_;
  double join_seconds_ = 0;
  std::chrono::milliseconds timeout_{};
  std::chrono::steady_clock::time_point deadline_;
  bool arrived_ = false;  // counted in "arrived" (its RANK claimed), so counted again in "failed_read"
  std::string source_;  // where MASTER_ADDR/MASTER_PORT came from, for messages
  // The file rendezvous's rank 0: its claim, the published name and the store file, removed at the end.
  std::unique_ptr<FolderClaim> claim_;
  std::string published_;
  std::string store_file_;
  std::string pointer_file_;
};

}  // namespace mygpt
