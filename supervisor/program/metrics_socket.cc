#include "supervisor/program/metrics_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "supervisor/program/proc_tree.h"

namespace pilot::supervisor {

MetricsSocket::MetricsSocket(std::string path, const std::optional<job::RunAs>& run_as, OwnerOf owner,
                             Sink sink)
    : path_(std::move(path)), owner_(std::move(owner)), sink_(std::move(sink)) {
  if (path_.empty()) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) {
    std::fprintf(stderr,
                 "pilot: program: the metrics socket's path is too long (%zu bytes, at most %zu): %s; "
                 "shorten the policy's state_dir\n",
                 path_.size(), sizeof addr.sun_path - 1, path_.c_str());
    return;
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  ::unlink(path_.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  // Credentials on every message, also on those sent before the
  // connection is accepted (an accepted socket inherits the option).
  const int on = 1;
  const mode_t old = umask(0177);
  const bool bound = listen_fd_ >= 0 &&
                     setsockopt(listen_fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) == 0 &&
                     bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                     listen(listen_fd_, 128) == 0;
  umask(old);
  if (!bound) {
    std::fprintf(stderr, "pilot: program: cannot listen on %s: %s\n", path_.c_str(), std::strerror(errno));
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  if (run_as && chown(path_.c_str(), run_as->uid, run_as->gid) != 0) {
    std::fprintf(stderr, "pilot: program: cannot hand %s to the job's user: %s\n", path_.c_str(),
                 std::strerror(errno));
  }
}

MetricsSocket::~MetricsSocket() {
  for (Conn& c : conns_) {
    if (c.fd >= 0) close(c.fd);
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    ::unlink(path_.c_str());
  }
}

void MetricsSocket::Refuse(pid_t pid) {
  sink_.outside(pid > 0 ? NameProcess(pid) : "an unknown process");
}

void MetricsSocket::Accept() {
  if (listen_fd_ < 0) return;
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    std::optional<int> owner;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) owner = owner_(cred.pid);
    if (!owner || conns_.size() >= 4096) {
      if (!owner) Refuse(cred.pid);
      close(fd);
      continue;
    }
    Conn c;
    c.fd = fd;
    c.pid = cred.pid;
    c.owner = *owner;
    conns_.push_back(std::move(c));
  }
}

bool MetricsSocket::MaySend(const Conn& c, pid_t pid) {
  if (pid <= 0) return false;
  if (pid == c.pid || std::find(senders_.begin(), senders_.end(), pid) != senders_.end()) return true;
  if (!owner_(pid)) return false;
  if (senders_.size() < 4096) senders_.push_back(pid);
  return true;
}

void MetricsSocket::PollFds(std::vector<int>* fds, std::vector<size_t>* index) const {
  for (size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i].fd < 0) continue;
    fds->push_back(conns_[i].fd);
    index->push_back(i);
  }
}

void MetricsSocket::Drain(size_t i) {
  Conn& c = conns_[i];
  char buf[65536];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  for (;;) {
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(c.fd, &msg, MSG_CMSG_CLOEXEC);
    if (n > 0) {
      pid_t sender = 0;
      for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS) {
          ucred cred{};
          std::memcpy(&cred, CMSG_DATA(h), sizeof cred);
          sender = cred.pid;
        }
      }
      if (!MaySend(c, sender)) {
        Refuse(sender);
        close(c.fd);
        c.fd = -1;
        return;
      }
      const int64_t cut = c.lines.overlong();
      c.lines.Append(buf, static_cast<size_t>(n));
      if (c.lines.overlong() > cut) {
        sink_.broken("a record line of more than " + std::to_string(kMaxMetricLine) + " bytes");
      }
      while (auto line = c.lines.Next()) sink_.line(c.owner, *line);
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      if (auto rest = c.lines.Rest()) sink_.line(c.owner, *rest);
      close(c.fd);
      c.fd = -1;
    }
    return;
  }
}

bool MetricsSocket::AnyOpen() const {
  return std::any_of(conns_.begin(), conns_.end(), [](const Conn& c) { return c.fd >= 0; });
}

void MetricsSocket::Close() {
  Accept();
  for (size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[i].fd >= 0) Drain(i);
    if (conns_[i].fd >= 0) close(conns_[i].fd);
    conns_[i].fd = -1;
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    ::unlink(path_.c_str());
    listen_fd_ = -1;
  }
}

}  // namespace pilot::supervisor
