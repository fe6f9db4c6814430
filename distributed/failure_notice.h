#pragma once
// Lines left in a job's rendezvous store for ranks that would otherwise wait for a peer that is gone.
// The ranks of a store launcher (torchrun, srun without MPI, plain variables) poll the store's `failed`
// key while they wait for each other (store_rendezvous.h); a rank that cannot join leaves its line
// there, so they end with it at once instead of waiting out --comm-timeout:
//   - a rank refused for its own variables (RankRefused: a SLURM_LOCALID beyond its node's tasks, RANK not
//     below WORLD_SIZE), before the command has even read its flags: it reaches rank 0's TCP store (or,
//     as rank 0, serves it until the others have read the line) within `patience`;
//   - rank 0 whose port is taken (another job's store on a port derived from job and step): it leaves the
//     line in whatever store holds the port, under this job's own keys, where its ranks are waiting.
// Both are best effort: a store that never comes or does not answer within `patience` is given up
// silently; the rank's own line is what it reports either way. Only the TCP rendezvous is reached (a
// rank refused before reading --rendezvous file:DIR cannot know the folder).
#include <chrono>
#include <string>

#include "distributed/launch_environment.h"

namespace mygpt {

// How long a refused rank looks for the store: rank 0 opens it right after it starts (before any data
// is read), so this covers a slow start of rank 0 (its CUDA context, a cold file system at scale).
constexpr std::chrono::seconds kRefusalPatience{30};

// `why`: the refused rank's own line; the others read "rank N was refused: <why>".
void tell_peers_of_refusal(const LaunchEnvironment& job, const std::string& why,
                           std::chrono::milliseconds patience = kRefusalPatience);

// As a client of whatever serves job.master_addr:master_port, sets this job's `failed` key to `line`.
void leave_failure_line(const LaunchEnvironment& job, const std::string& line, std::chrono::milliseconds patience);

}  // namespace mygpt
