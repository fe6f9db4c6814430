#include "common/folder_claim.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/file_io.h"
#include "common/file_time.h"
#include "common/process_identity.h"
#include "common/strprintf.h"

namespace mygpt {
namespace fs = std::filesystem;
namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string utc_text(std::time_t seconds) {
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The claim file's "key=value" lines; a claim being written by the O_EXCL fallback may be incomplete.
std::map<std::string, std::string> parse_claim(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return fields;
}

std::string field_or(const std::map<std::string, std::string>& fields, const std::string& key, const char* otherwise) {
  const auto it = fields.find(key);
  return it == fields.end() || it->second.empty() ? otherwise : it->second;
}

// Reads a small file through an open descriptor (the claim stays the file that was stat'ed).
std::string read_fd(int fd) {
  std::string text;
  char buffer[512];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > 4096) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

// what_failed: how a failure names the file ("cannot write PATH" unless given).
void write_all(int fd, const std::string& text, const fs::path& path, const std::string& what_failed = "") {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw OutputFileError((what_failed.empty() ? "cannot write " + path.string() : what_failed) + ": " +
                            std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

struct Holder {
  bool exists = false;
  ino_t inode = 0;
  std::map<std::string, std::string> fields;
  double heartbeat_age = 0;  // seconds, by the file server's clock
};

Holder read_holder(const fs::path& claim, const struct timespec& server_now) {
  Holder h;
  const FileDescriptor fd(::open(claim.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat info {};
  if (fd.get() < 0 || ::fstat(fd.get(), &info) != 0) return h;
  h.exists = true;
  h.inode = info.st_ino;
  h.fields = parse_claim(read_fd(fd.get()));
  h.heartbeat_age = static_cast<double>(server_now.tv_sec - modification_time(info).tv_sec) +
                    static_cast<double>(server_now.tv_nsec - modification_time(info).tv_nsec) * 1e-9;
  return h;
}

// The claim's "since" (written by utc_text) in seconds since the epoch; nullopt when it is not one.
std::optional<double> since_of(const Holder& h) {
  std::tm utc{};
  const std::string text = field_or(h.fields, "since", "");
  if (::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &utc) == nullptr) return std::nullopt;
  return static_cast<double>(::timegm(&utc));
}

// Why a live pid on this host is not the holder, or "" when it is (or nothing says otherwise).
std::string why_not_the_holder(const Holder& h, pid_t pid) {
  const std::string recorded = field_or(h.fields, "process", "");
  const std::string now = process_start_identity(pid);
  if (!recorded.empty() && !now.empty()) {
    if (recorded == now) return "";
    const std::string recorded_boot = recorded.substr(0, recorded.find('/'));
    if (recorded_boot != now.substr(0, now.find('/'))) return "the host has restarted since; its pid is reused";
    return strprintf("pid %ld is now another process, started after the holder's", static_cast<long>(pid));
  }
  // A claim written before claims named their process: a process that started after the claim was
  // written cannot be its holder. Two seconds of slack: "since" is truncated to the second, and the
  // kernel's boot time (the base of a start time) is a whole second that may be one off.
  const auto since = since_of(h);
  const auto started = process_start_time(pid);
  if (since && started && *started > *since + 2.0) {
    return "pid " + std::to_string(pid) + " is now another process, started at " +
           utc_text(static_cast<std::time_t>(*started)) + ", after the claim";
  }
  return "";
}

// Why a holder is an earlier start of this batch job, or "" when it is not (or says nothing of its job).
std::string why_earlier_start(const Holder& h, const ClaimingJob& mine) {
  if (mine.id.empty() || field_or(h.fields, "job", "") != mine.id) return "";
  const std::string text = field_or(h.fields, "restart", "");
  char* end = nullptr;
  const long long restart = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || restart >= mine.restart) return "";
  return strprintf("an earlier start of %s (restart %lld; this is restart %lld), which the scheduler ended",
                   mine.id.c_str(), restart, mine.restart);
}

// Why a holder is gone, or "" while it is alive. On this host its pid decides (a run stopped with SIGSTOP
// or suspended by Slurm beats no heart, and is alive) together with the process's start (a pid alone is
// reused: PID 1 in a container after a restart, any pid after a reboot); elsewhere only the heartbeat can
// tell.
std::string why_gone(const Holder& h, const std::string& this_host) {
  const auto host = h.fields.find("host");
  const auto pid_text = h.fields.find("pid");
  if (host != h.fields.end() && host->second == this_host && pid_text != h.fields.end()) {
    char* end = nullptr;
    const long pid = std::strtol(pid_text->second.c_str(), &end, 10);
    if (end != pid_text->second.c_str() && *end == '\0' && pid > 0) {
      const bool exists = ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
      if (!exists) return "no such process on this host";
      if (process_has_exited(static_cast<pid_t>(pid))) return "pid " + std::to_string(pid) + " has exited (not yet reaped)";
      return why_not_the_holder(h, static_cast<pid_t>(pid));
    }
  }
  if (h.heartbeat_age > FolderClaim::kStaleSeconds) return strprintf("no heartbeat for %.0f s", h.heartbeat_age);
  return "";
}

std::string describe(const Holder& h) {
  return "host " + field_or(h.fields, "host", "?") + ", pid " + field_or(h.fields, "pid", "?") + ", since " +
         field_or(h.fields, "since", "?");
}

std::string random_token() {
  std::random_device device;
  return strprintf("%08x%08x", device(), device());
}

}  // namespace

FolderClaim::FolderClaim(const fs::path& folder, std::string_view what, const ClaimingJob& job)
    : claim_(folder / kFileName) {
  // The outermost folder of the path that this claim creates: a run refused before it wrote anything
  // removes what it made (an empty --out left behind reads as a run that started).
  std::error_code ec;
  for (fs::path p = fs::absolute(folder, ec).lexically_normal(); !ec && !p.empty() && !fs::exists(p, ec);
       p = p.parent_path()) {
    created_ = p;
    if (p == p.parent_path()) break;
  }
  try {
    claim(folder, what, job);
  } catch (...) {
    remove_created_folders();  // a refused or failed claim leaves no folder it made
    throw;
  }
  heartbeat_ = std::thread([this] { heartbeat(); });
}

void FolderClaim::claim(const fs::path& folder, std::string_view what, const ClaimingJob& job) {
  create_output_directory(folder, what);
  const std::string host = host_name();
  token_ = random_token();
  std::string content = "host=" + host + "\npid=" + std::to_string(::getpid()) +
                        "\nsince=" + utc_text(std::time(nullptr)) + "\ntoken=" + token_ +
                        "\nprocess=" + process_start_identity(::getpid()) + "\n";
  if (!job.id.empty()) content += "job=" + job.id + "\nrestart=" + std::to_string(job.restart) + "\n";
  // The claim is written whole under a private name first: link() then publishes it atomically.
  const fs::path mine = folder / (std::string(".") + kFileName + "." + host + "." + std::to_string(::getpid()));
  struct Cleanup {
    const fs::path& path;
    ~Cleanup() { ::unlink(path.c_str()); }
  } cleanup{mine};
  {
    const FileDescriptor fd(::open(mine.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    // Named by the option: the private name is ours; the folder (/proc, a full disk) is the problem.
    const std::string cannot = std::string(what) + " '" + folder.string() + "': cannot write a file in it";
    if (fd.get() < 0) throw OutputFileError(cannot + ": " + std::strerror(errno));
    write_all(fd.get(), content, mine, cannot);
  }
  const std::string name = std::string(what) + " '" + folder.string() + "'";

  for (int attempt = 0;; ++attempt) {
    if (attempt == 8) throw std::invalid_argument(name + ": cannot claim it (" + claim_.string() + " keeps changing)");
    bool claimed = false;
    if (::link(mine.c_str(), claim_.c_str()) == 0) {
      claimed = true;
    } else if (errno == EEXIST) {
      // NFS may answer a retried LINK that did succeed with EEXIST: two names on our file say it did.
      struct stat info {};
      claimed = ::stat(mine.c_str(), &info) == 0 && info.st_nlink == 2;
    } else if (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP || errno == EMLINK || errno == ENOSYS) {
      // No hard links here (some FUSE and SMB mounts): an exclusive create, written right away.
      const FileDescriptor fd(::open(claim_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd.get() >= 0) {
        write_all(fd.get(), content, claim_);
        claimed = true;
      } else if (errno != EEXIST) {
        throw OutputFileError("cannot write " + claim_.string() + ": " + std::strerror(errno));
      }
    } else {
      throw OutputFileError("cannot write " + claim_.string() + ": " + std::strerror(errno));
    }
    if (claimed) break;

    // Held: alive, or gone? The server's "now" is the mtime of the file we just wrote there.
    ::utimensat(AT_FDCWD, mine.c_str(), nullptr, 0);
    struct stat mine_info {};
    ::stat(mine.c_str(), &mine_info);
    const Holder holder = read_holder(claim_, modification_time(mine_info));
    if (!holder.exists) continue;  // released meanwhile
    std::string gone = why_earlier_start(holder, job);
    if (gone.empty()) gone = why_gone(holder, host);
    if (gone.empty()) {
      throw std::invalid_argument(name + " is in use by another run (" + describe(holder) + "; claim file " +
                                  claim_.string() + "): wait for it to end, or choose another " + std::string(what));
    }
    // Renamed aside, then checked to be the file judged dead: two processes taking over at once cannot
    // remove each other's new claim.
    const fs::path aside = folder / (std::string(".") + kFileName + ".gone." + host + "." + std::to_string(::getpid()));
    if (::rename(claim_.c_str(), aside.c_str()) != 0) continue;
    struct stat aside_info {};
    if (::stat(aside.c_str(), &aside_info) == 0 && aside_info.st_ino != holder.inode) {
      (void)::link(aside.c_str(), claim_.c_str());  // someone's fresh claim: put it back
      ::unlink(aside.c_str());
      continue;
    }
    ::unlink(aside.c_str());
    takeover_note_ = "note: took over " + name + " from a run that is gone (" + describe(holder) + "; " + gone + ")";
  }
  sync_directory(folder);
  fd_ = ::open(claim_.c_str(), O_RDONLY | O_CLOEXEC);
}

void FolderClaim::heartbeat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::seconds(kHeartbeatSeconds), [this] { return stopping_; })) {
    if (fd_ >= 0) ::futimens(fd_, nullptr);  // UTIME_NOW: the file server's clock on NFS and Lustre
  }
}

FolderClaim::~FolderClaim() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (fd_ >= 0) ::close(fd_);
  // Only our own claim is removed: one taken over after a long stall (no heartbeat) is another run's now.
  const FileDescriptor fd(::open(claim_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() >= 0 && field_or(parse_claim(read_fd(fd.get())), "token", "") == token_) {
    ::unlink(claim_.c_str());
    sync_directory(claim_.parent_path().empty() ? fs::path(".") : claim_.parent_path());
  }
  remove_created_folders();
}

void FolderClaim::remove_created_folders() const {
  // Folders this claim created and nothing filled (rmdir removes only empty ones), innermost first.
  if (created_.empty()) return;
  std::error_code ec;
  for (fs::path p = fs::absolute(claim_.parent_path(), ec).lexically_normal(); !ec && !p.empty(); p = p.parent_path()) {
    if (::rmdir(p.c_str()) != 0 || p == created_ || p == p.parent_path()) break;
  }
}

}  // namespace mygpt
