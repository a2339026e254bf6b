#include "supervisor/program/checkpoint_watch.h"

#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pilot::supervisor {

CheckpointWatch::CheckpointWatch(const std::vector<std::string>& files) {
  if (files.empty()) return;
  const size_t n = std::min(files.size(), kMaxWatchFiles);
  opened_.assign(files.size(), false);
  fd_ = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY | O_LARGEFILE);
  if (fd_ < 0) {
    problem_ = std::string("fanotify: ") + std::strerror(errno);
    return;
  }
  watched_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& f = files[i];
    struct stat st{};
    if (lstat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        fanotify_mark(fd_, FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW, FAN_OPEN_PERM, AT_FDCWD, f.c_str()) != 0) {
      if (problem_.empty()) problem_ = "cannot watch " + f + ": " + std::strerror(errno ? errno : EINVAL);
      continue;
    }
    watched_[i] = {st.st_dev, st.st_ino};
  }
}

CheckpointWatch::~CheckpointWatch() {
  if (fd_ >= 0) close(fd_);
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
      if ((m->mask & FAN_Q_OVERFLOW) && problem_.empty()) problem_ = "fanotify: events lost (queue overflow)";
      if (m->fd < 0) continue;
      struct stat st{};
      if (ours(m->pid) && fstat(m->fd, &st) == 0) {
        for (size_t i = 0; i < watched_.size(); ++i) {
          if (watched_[i].ino == st.st_ino && watched_[i].dev == st.st_dev && watched_[i].ino != 0) {
            opened_[i] = true;
          }
        }
      }
      if (m->mask & FAN_OPEN_PERM) {
        const fanotify_response allow{m->fd, FAN_ALLOW};
        if (write(fd_, &allow, sizeof allow) != static_cast<ssize_t>(sizeof allow) && problem_.empty()) {
          problem_ = std::string("fanotify: cannot answer an open: ") + std::strerror(errno);
        }
      }
      close(m->fd);
    }
  }
}

void CheckpointWatch::Close(const std::function<bool(pid_t)>& ours) {
  if (fd_ < 0) return;
  ReadEvents(ours);
  close(fd_);
  fd_ = -1;
}

}  // namespace pilot::supervisor
