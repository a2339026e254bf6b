#include "job/task_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pilot::job {
namespace {
constexpr char kStdioTag = 'S';
constexpr char kStatusTag = 'X';
}  // namespace

Status SendStdio(int socket_fd) {
  char tag = kStdioTag;
  iovec iov{&tag, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(3 * sizeof(int));
  const int fds[3] = {0, 1, 2};
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  ssize_t n;
  do {
    n = ::sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return Status::IoError("supervisor channel", std::string("send: ") + std::strerror(errno));
  return Status::Ok();
}

Result<std::array<int, 3>> ReceiveStdio(int socket_fd) {
  char tag = 0;
  iovec iov{&tag, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n != 1 || tag != kStdioTag) {
    return Status::IoError("supervisor channel", n == 0 ? "the task went away" : "no stdio received");
  }
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(3 * sizeof(int))) {
    return Status::IoError("supervisor channel", "no stdio descriptors received");
  }
  std::array<int, 3> fds{};
  std::memcpy(fds.data(), CMSG_DATA(c), sizeof(int) * 3);
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
