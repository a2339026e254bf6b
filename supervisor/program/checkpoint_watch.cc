#include "supervisor/program/checkpoint_watch.h"

#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/strings.h"
#include "supervisor/program/page_cache.h"
#include "supervisor/program/proc_tree.h"

namespace pilot::supervisor {
namespace {

// The page cache tells what was read when the supervisor's listing (which
// reads every byte) left at least this share of the files cached, and
// dropping them left at most kLeftAfterDrop.
constexpr double kCachedByListing = 0.5;
constexpr double kLeftAfterDrop = 0.05;
constexpr double kSampleEverySeconds = 1.0;

std::string Size(int64_t bytes) { return FormatBytes(static_cast<double>(bytes), ByteUnit::kKiB); }

}  // namespace

CheckpointWatch::CheckpointWatch(const std::vector<std::string>& files, uid_t user) : user_(user) {
  if (files.empty()) return;
  const size_t n = std::min(files.size(), kMaxWatchFiles);
  r_.opened.assign(files.size(), false);
  r_.read.assign(files.size(), 0);
  watched_.resize(n);
  // The watch's descriptor first; then the files held open (the page
  // cache is read through them) before any is marked, so that the
  // supervisor's own opens are not events. A file that cannot be
  // held (more files than descriptors) is still marked by its path: only
  // the reads go unmeasured.
  fd_ = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY | O_LARGEFILE);
  const int init_errno = errno;
  std::string hold_problem;
  for (size_t i = 0; i < n; ++i) {
    struct stat before{}, st{};
    if (lstat(files[i].c_str(), &before) != 0 || !S_ISREG(before.st_mode)) continue;
    watched_[i] = {before.st_dev, before.st_ino, -1, static_cast<int64_t>(before.st_size)};
    const int fd = ::open(files[i].c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || before.st_ino != st.st_ino || before.st_dev != st.st_dev) {
      if (hold_problem.empty()) hold_problem = "cannot open " + files[i] + ": " + std::strerror(errno ? errno : EINVAL);
      if (fd >= 0) close(fd);
      continue;
    }
    watched_[i].fd = fd;
  }
  if (fd_ < 0) {
    r_.problem = std::string("fanotify: ") + std::strerror(init_errno);
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (watched_[i].ino == 0 ||
          fanotify_mark(fd_, FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW, FAN_OPEN_PERM, AT_FDCWD, files[i].c_str()) != 0) {
        if (r_.problem.empty()) r_.problem = "cannot watch " + files[i] + ": " + std::strerror(errno ? errno : EINVAL);
        watched_[i].ino = 0;
      }
    }
  }
  if (!hold_problem.empty()) {
    r_.read_problem = hold_problem;
    return;
  }
  int64_t total = 0, cached = 0;
  for (const Watched& w : watched_) {
    Result<int64_t> c = CachedBytes(w.fd, w.size);
    if (!c.ok()) {
      r_.read_problem = c.status().Message();
      return;
    }
    total += w.size;
    cached += *c;
  }
  StartReads(cached, total);
}

void CheckpointWatch::StartReads(int64_t cached_by_listing, int64_t total) {
  int64_t left = 0;
  for (const Watched& w : watched_) {
    Status dropped = DropCached(w.fd);
    Result<int64_t> c = dropped.ok() ? CachedBytes(w.fd, w.size) : Result<int64_t>(dropped);
    if (!c.ok()) {
      r_.read_problem = c.status().Message();
      return;
    }
    left += *c;
  }
  if (static_cast<double>(cached_by_listing) < kCachedByListing * static_cast<double>(total)) {
    r_.read_problem = "the page cache held " + Size(cached_by_listing) + " of the checkpoint's " + Size(total) +
                      " right after the supervisor read it all: its file system reads past the page cache, "
                      "or the checkpoint is larger than the cache";
    return;
  }
  if (static_cast<double>(left) > kLeftAfterDrop * static_cast<double>(total)) {
    r_.read_problem = "the checkpoint's cached pages could not be dropped (" + Size(left) + " of " + Size(total) +
                      " still cached; tmpfs keeps every page)";
    return;
  }
  r_.read_measured = true;
  sampling_ = true;
  last_sample_ = std::chrono::steady_clock::now();
}

CheckpointWatch::~CheckpointWatch() {
  if (fd_ >= 0) close(fd_);
  for (const Watched& w : watched_) {
    if (w.fd >= 0) close(w.fd);
  }
}

void CheckpointWatch::ReadEvents(const std::function<bool(pid_t)>& ours) {
  if (fd_ < 0) return;
  alignas(fanotify_event_metadata) char buf[8192];
  for (;;) {
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) return;
    auto* m = reinterpret_cast<fanotify_event_metadata*>(buf);
    ssize_t left = n;
    for (; FAN_EVENT_OK(m, left); m = FAN_EVENT_NEXT(m, left)) {
      if ((m->mask & FAN_Q_OVERFLOW) && r_.problem.empty()) r_.problem = "fanotify: events lost (queue overflow)";
      if (m->fd < 0) continue;
      struct stat st{};
      const bool phase = ours(m->pid);
      if (phase && fstat(m->fd, &st) == 0) {
        for (size_t i = 0; i < watched_.size(); ++i) {
          if (watched_[i].ino == st.st_ino && watched_[i].dev == st.st_dev && watched_[i].ino != 0) {
            r_.opened[i] = true;
          }
        }
      } else if (!phase && m->pid != getpid() && UidOf(m->pid) == user_) {
        if (r_.outside_opens++ == 0) r_.outside_example = NameProcess(m->pid);
      }
      if (m->mask & FAN_OPEN_PERM) {
        const fanotify_response allow{m->fd, FAN_ALLOW};
        if (write(fd_, &allow, sizeof allow) != static_cast<ssize_t>(sizeof allow) && r_.problem.empty()) {
          r_.problem = std::string("fanotify: cannot answer an open: ") + std::strerror(errno);
        }
      }
      close(m->fd);
    }
  }
}

void CheckpointWatch::Sample() {
  for (size_t i = 0; i < watched_.size(); ++i) {
    Result<int64_t> c = CachedBytes(watched_[i].fd, watched_[i].size);
    if (!c.ok()) {
      r_.read_measured = false;
      r_.read_problem = c.status().Message();
      sampling_ = false;
      return;
    }
    r_.read[i] = std::max(r_.read[i], *c);
  }
  last_sample_ = std::chrono::steady_clock::now();
}

void CheckpointWatch::Round(double first_record_seconds) {
  if (r_.first_record_seconds >= 0) return;
  if (first_record_seconds >= 0) {
    r_.first_record_seconds = first_record_seconds;
    if (sampling_) Sample();
    sampling_ = false;
    return;
  }
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_sample_).count();
  if (sampling_ && since >= kSampleEverySeconds) Sample();
}

void CheckpointWatch::Close(const std::function<bool(pid_t)>& ours) {
  if (sampling_) Sample();
  sampling_ = false;
  if (fd_ < 0) return;
  ReadEvents(ours);
  close(fd_);
  fd_ = -1;
}

}  // namespace pilot::supervisor
