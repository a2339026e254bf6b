// Which of a checkpoint's files the processes of a phase opened, as root
// sees it (fanotify, permission events): that a resumed process read its
// checkpoint is then the supervisor's observation, not the program's word
// (pilot-program(7), CHECKPOINT). Each file is marked by inode, so renaming
// or replacing its path later does not move the mark. The opener waits in
// open() until the supervisor has answered, so it is still there to be
// placed in the phase's tree however briefly it lives (a `cat`, a loader
// worker, a process inside a container); every open is allowed.
//
// Thread-safety: one phase's, from the supervisor's single thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace pilot::supervisor {

inline constexpr size_t kMaxWatchFiles = 4096;

class CheckpointWatch {
 public:
  // Marks the first kMaxWatchFiles of `files` (none: nothing is watched).
  // A file that cannot be marked (not a regular file, gone) is named in
  // problem(), and so is a kernel without fanotify.
  explicit CheckpointWatch(const std::vector<std::string>& files);
  ~CheckpointWatch();
  CheckpointWatch(const CheckpointWatch&) = delete;
  CheckpointWatch& operator=(const CheckpointWatch&) = delete;

  // The fanotify descriptor, for poll(2); -1 when nothing is watched.
  int fd() const { return fd_; }
  // Answers every waiting open; a file opened by a process for which
  // `ours(pid)` holds counts as opened.
  void ReadEvents(const std::function<bool(pid_t)>& ours);
  // The last events answered, then the marks gone: an open after this is
  // not held.
  void Close(const std::function<bool(pid_t)>& ours);

  // Per file (in `files`' order): whether a process of the phase opened it;
  // empty when no file was given.
  const std::vector<bool>& opened() const { return opened_; }
  const std::string& problem() const { return problem_; }

 private:
  struct Watched {  // by identity
    dev_t dev = 0;
    ino_t ino = 0;
  };
  int fd_ = -1;
  std::vector<Watched> watched_;
  std::vector<bool> opened_;
  std::string problem_;
};

}  // namespace pilot::supervisor
