// The Unix socket one phase of a user's program writes its records to
// (pilot-program(7), METRICS RECORDS): root binds it in a folder only root
// writes to and hands it to the job's user (mode 0600), so only the user's
// processes may connect. Records are credited by the process that sent
// them, not the one that connected: every message carries its sender's
// credentials (SO_PASSCRED; the kernel never joins two senders' bytes in
// one read), and a connection is read only while each sender belongs to the
// phase (`OwnerOf`: its parent chain reaches one of the phase's processes,
// or the supervisor that inherited their orphans). Any other writer (a
// process of the same user outside the job that connected, or that was
// handed a connected descriptor) is refused, counted and named, and the
// connection it wrote on is closed.
//
// Thread-safety: one phase's, from the supervisor's single thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job/subprocess.h"
#include "supervisor/program/metrics.h"

namespace pilot::supervisor {

class MetricsSocket {
 public:
  // The index of the phase's process `pid` descends from; -1 for a process
  // the supervisor inherited (a rank's orphan); nullopt outside the phase.
  using OwnerOf = std::function<std::optional<int>(pid_t pid)>;
  // What a connection's bytes become: each complete line with its owner,
  // a line over kMaxMetricLine bytes (cut, a protocol break), and a writer
  // refused ("pid 123 (python3), uid 1000").
  struct Sink {
    std::function<void(int owner, const std::string& line)> line;
    std::function<void(const std::string& why)> broken;
    std::function<void(const std::string& who)> outside;
  };

  // Binds `path` ("" = no socket: every call does nothing). Problems are
  // said on standard error: a phase without its socket gets no records,
  // which its checks name.
  MetricsSocket(std::string path, const std::optional<job::RunAs>& run_as, OwnerOf owner, Sink sink);
  ~MetricsSocket();
  MetricsSocket(const MetricsSocket&) = delete;
  MetricsSocket& operator=(const MetricsSocket&) = delete;

  // The listening socket (-1 when there is none, or after Close).
  int listen_fd() const { return listen_fd_; }
  // Accepts every waiting connection of the phase's processes.
  void Accept();
  // The open connections' descriptors, for poll(2), and their index.
  void PollFds(std::vector<int>* fds, std::vector<size_t>* index) const;
  // Reads what connection `i` has now; closes it at its end (its last,
  // unterminated line taken too), or at a message of a writer outside the
  // phase (its bytes and the line they would have joined dropped).
  void Drain(size_t i);
  bool AnyOpen() const;
  // The last of every connection read, each closed, the socket removed.
  void Close();

 private:
  struct Conn {
    int fd = -1;
    pid_t pid = 0;   // the process that connected (checked when it did)
    int owner = -1;  // the phase's process it descends from
    LineBuffer lines;
  };
  // Whether process `pid`, which sent a message on `c`, may: the one that
  // connected, one checked before, or one of the phase now.
  bool MaySend(const Conn& c, pid_t pid);
  void Refuse(pid_t pid);

  std::string path_;
  OwnerOf owner_;
  Sink sink_;
  std::vector<pid_t> senders_;  // processes found to be the phase's while they were alive
  int listen_fd_ = -1;
  std::vector<Conn> conns_;
};

}  // namespace pilot::supervisor
