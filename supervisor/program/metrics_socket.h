// The Unix socket one phase of a user's program writes its records to
// (pilot-program(7), METRICS RECORDS): root binds it in a folder only root
// writes to and hands it to the job's user (mode 0600), so only the user's
// processes may connect. A connection is read only when the process that
// made it belongs to the phase (`OwnerOf`: its parent chain reaches one of
// the phase's processes, or the supervisor that inherited their orphans);
// any other writer is refused, counted and named.
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
  // and a line over kMaxMetricLine bytes (cut, a protocol break).
  struct Sink {
    std::function<void(int owner, const std::string& line)> line;
    std::function<void(const std::string& why)> broken;
  };

  // Binds `path` ("" = no socket: every call does nothing). Problems are
  // said on standard error: a phase without its socket gets no records,
  // which its checks name.
  MetricsSocket(std::string path, const std::optional<job::RunAs>& run_as);
  ~MetricsSocket();
  MetricsSocket(const MetricsSocket&) = delete;
  MetricsSocket& operator=(const MetricsSocket&) = delete;

  // The listening socket (-1 when there is none, or after Close).
  int listen_fd() const { return listen_fd_; }
  // Accepts every waiting connection; a refused writer is counted into
  // *outside and named in *examples (the first five, each once).
  void Accept(const OwnerOf& owner, int64_t* outside, std::vector<std::string>* examples);
  // The open connections' descriptors, for poll(2), and their index.
  void PollFds(std::vector<int>* fds, std::vector<size_t>* index) const;
  // Reads what connection `i` has now; closes it at its end (its last,
  // unterminated line taken too).
  void Drain(size_t i, const Sink& sink);
  bool AnyOpen() const;
  // The last of every connection read, each closed, the socket removed.
  void Close(const OwnerOf& owner, const Sink& sink, int64_t* outside,
             std::vector<std::string>* examples);

 private:
  struct Conn {
    int fd = -1;
    int owner = -1;
    LineBuffer lines;
  };
  std::string path_;
  int listen_fd_ = -1;
  std::vector<Conn> conns_;
};

}  // namespace pilot::supervisor
