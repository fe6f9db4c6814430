#pragma once
// One process at a time in an output folder. A second training run into the folder of a live one
// would resume from an older checkpoint, truncate the first run's metrics and interleave checkpoints of
// two trajectories; a claim file refuses it.
//
// The mechanism has to work where clusters keep their runs: local disks, NFS and Lustre, shared by
// processes on several hosts. So it relies only on what those file systems make atomic and coherent
// between hosts:
//   - The claim <folder>/run.lock is published with link(2) from a fully written private file: link
//     fails with EEXIST when the name exists, atomically on NFS (v2 on) and Lustre, and a reader never
//     sees a half-written claim. (O_EXCL create is the fallback where hard links are refused.)
//   - The claim names its holder: host, pid, start time, and a random token.
//   - The holder's heartbeat: a thread refreshes the claim's mtime every kHeartbeatSeconds. An NFS or
//     Lustre server stamps that time itself, and a reader compares it with the mtime of a file it has just
//     written there, so the clocks of different hosts do not matter.
//   - A claim made inside a batch job names the job and its start (Slurm's job id and restart count): a
//     claim of an earlier start of the same job is a dead one, whatever its host and heartbeat say. A
//     scheduler ends a job's start before it requeues it (Slurm does), and the requeued start may run on
//     another node seconds later, long before the old claim's heartbeat goes stale.
//   - A holder on this host is alive while its pid is (kill(pid, 0)) and that pid is still the same
//     process: the claim records the host's boot id and the process's start time within that boot
//     (process_identity.h), so a pid reused after a reboot, or PID 1 of a container restarted after kill -9
//     or the OOM killer, is told from the holder. A claim written before claims named their process is
//     held by a live pid only if that process started before the claim was written. A holder on another
//     host is alive while its heartbeat is younger than kStaleSeconds (pids mean nothing across hosts).
//     Opening the claim revalidates its attributes on NFS (close-to-open), so a cached mtime cannot make
//     a live holder look dead. A dead holder's claim is renamed aside (rename is atomic) and taken over
//     with a note.
// fcntl/flock locks are not used, though the kernel would release them at death: on NFS they depend on the
// lock daemon (NLM) and on Lustre on a mount option (`flock`) that many sites leave off (ENOSYS), and a
// POSIX lock is dropped when any descriptor of the file in the process closes. Heartbeats, pids and
// process start times need nothing beyond the file system and /proc.
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace mygpt {

// The batch job a claim is made in (empty id: none): which job, and how often it was requeued before.
struct ClaimingJob {
  std::string id;  // e.g. "slurm job 1234 on cluster c"
  long long restart = 0;
};

class FolderClaim {
 public:
  static constexpr int kHeartbeatSeconds = 10;
  static constexpr int kStaleSeconds = 60;
  static constexpr const char* kFileName = "run.lock";

  // Creates `folder` if missing and claims it for this process, or throws std::invalid_argument, one
  // line naming `what` (the option, "--out"), the folder and the holder (host, pid, since when).
  FolderClaim(const std::filesystem::path& folder, std::string_view what, const ClaimingJob& job = {});
  // Releases the claim (removes the file when it is still ours). Every return and every exception
  // passes here; a process killed outright (SIGKILL) leaves a claim that the next run takes over.
  ~FolderClaim();
  FolderClaim(const FolderClaim&) = delete;
  FolderClaim& operator=(const FolderClaim&) = delete;

  // Not empty when the claim of a holder that is gone was taken over: a line saying whose.
  const std::string& takeover_note() const { return takeover_note_; }
  const std::filesystem::path& path() const { return claim_; }

 private:
  void claim(const std::filesystem::path& folder, std::string_view what, const ClaimingJob& job);
  void heartbeat();
  void remove_created_folders() const;

  std::filesystem::path claim_;
  std::filesystem::path created_;  // the outermost folder the claim created; removed at the end if empty
  std::string token_;
  std::string takeover_note_;
  int fd_ = -1;  // the claim, open for the heartbeat's futimens
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

}  // namespace mygpt
