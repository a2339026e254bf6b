#include "job/task_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pilot::job {
namespace {
constexpr char kStdioTag = 'S';
constexpr char kStatusTag = 'X';
constexpr char kStdioEnvTag = 'E';
constexpr size_t kMaxFds = 4;

// Sends `fds` with a one-byte tag.
Status SendTagged(int socket_fd, char tag, const int* fds, size_t count) {
  iovec iov{&tag, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(count * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds, count * sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return Status::IoError("supervisor channel", std::string("send: ") + std::strerror(errno));
  return Status::Ok();
}

// Receives `count` descriptors sent with `tag`.
Status ReceiveTagged(int socket_fd, char want, int* fds, size_t count) {
  char tag = 0;
  iovec iov{&tag, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  cmsghdr* c = n == 1 ? CMSG_FIRSTHDR(&msg) : nullptr;
  const bool fds_came = c != nullptr && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS;
  if (n != 1 || tag != want || !fds_came || c->cmsg_len != CMSG_LEN(count * sizeof(int))) {
    // Descriptors that came with the wrong message are not kept open.
    if (fds_came) {
      const size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < got && i < kMaxFds; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (fd >= 0) ::close(fd);
      }
    }
    return Status::IoError("supervisor channel", n == 0   ? "the task went away"
                                                 : n != 1 ? std::string("receive: ") + std::strerror(errno)
                                                          : "not the descriptors expected");
  }
  std::memcpy(fds, CMSG_DATA(c), count * sizeof(int));
  return Status::Ok();
}

}  // namespace

Status SendStdio(int socket_fd) {
  const int fds[3] = {0, 1, 2};
  return SendTagged(socket_fd, kStdioTag, fds, 3);
}

Result<std::array<int, 3>> ReceiveStdio(int socket_fd) {
  std::array<int, 3> fds{};
  PILOT_RETURN_IF_ERROR(ReceiveTagged(socket_fd, kStdioTag, fds.data(), 3));
  return fds;
}

Status SendStdioAndEnv(int socket_fd, int env_fd) {
  const int fds[4] = {0, 1, 2, env_fd};
  return SendTagged(socket_fd, kStdioEnvTag, fds, 4);
}

Result<std::array<int, 4>> ReceiveStdioAndEnv(int socket_fd) {
  std::array<int, 4> fds{};
  PILOT_RETURN_IF_ERROR(ReceiveTagged(socket_fd, kStdioEnvTag, fds.data(), 4));
  return fds;
}

Status SendExitStatus(int socket_fd, int status) {
  const char buf[2] = {kStatusTag, static_cast<char>(status & 0xff)};
  ssize_t n;
  do {
    n = ::send(socket_fd, buf, sizeof(buf), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 2) return Status::IoError("supervisor channel", std::string("send: ") + std::strerror(errno));
  return Status::Ok();
}

std::optional<int> ReceiveExitStatus(int socket_fd) {
  unsigned char buf[2];
  size_t got = 0;
  while (got < sizeof(buf)) {
    const ssize_t n = ::read(socket_fd, buf + got, sizeof(buf) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  if (buf[0] != static_cast<unsigned char>(kStatusTag)) return std::nullopt;
  return static_cast<int>(buf[1]);
}

}  // namespace pilot::job
