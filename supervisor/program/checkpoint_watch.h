// What a phase's processes did with a checkpoint's files, as root sees it:
// which of them they opened (fanotify, permission events) and how much of
// them they read before the phase's first record (the page cache), so that
// "the resumed process restored its checkpoint" is the supervisor's
// observation, not the program's word (pilot-program(7), CHECKPOINT).
//
// Opens. Each file is marked by inode, so renaming or replacing its path
// later does not move the mark. The opener waits in open() until the
// supervisor has answered, so it is still there to be placed in the phase's
// tree however briefly it lives (a `cat`, a loader worker, a process inside
// a container); every open is allowed. An open by another process of the
// job's user (outside the phase) is counted and named: its reads would
// count as the phase's.
//
// Reads. Before the phase starts, each file's dirty pages are written and
// its cached pages dropped (page_cache.h); from then until the first record
// (Round) the watch samples which pages are cached again, file by
// file, and keeps the most it saw. Read-ahead rounds a read up; nothing
// makes an unread page count. Where the page cache does not tell (tmpfs
// keeps every page; a file system that reads past it, or a checkpoint
// larger than the cache, never showed the listing's own read of it), the
// reads are not measured and read_problem says why.
//
// Thread-safety: one phase's, from the supervisor's single thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pilot::supervisor {

inline constexpr size_t kMaxWatchFiles = 4096;

// What the watch saw, per file in the order given.
struct WatchResult {
  std::vector<bool> opened;   // by a process of the phase; empty: no file given
  std::string problem;        // why the files could not be watched, or events were lost
  bool read_measured = false;
  std::string read_problem;   // why not
  std::vector<int64_t> read;  // bytes cached again by the first record
  // Seconds from the phase's start to its first record; -1 when none came
  // (the reads are then those seen by the phase's end).
  double first_record_seconds = -1;
  int outside_opens = 0;      // by processes of the job's user outside the phase
  std::string outside_example;  // the first: "pid 123 (python3)"
};

class CheckpointWatch {
 public:
  // Marks the first kMaxWatchFiles of `files` (none: nothing is watched)
  // and drops their cached pages. A file that cannot be marked (not a
  // regular file, gone) is named in the result's problem, and so is a
  // kernel without fanotify. `user`: the job's user, whose opens outside
  // the phase are counted.
  CheckpointWatch(const std::vector<std::string>& files, uid_t user);
  ~CheckpointWatch();
  CheckpointWatch(const CheckpointWatch&) = delete;
  CheckpointWatch& operator=(const CheckpointWatch&) = delete;

  // The fanotify descriptor, for poll(2); -1 when nothing is watched.
  int fd() const { return fd_; }
  // Answers every waiting open; a file opened by a process for which
  // `ours(pid)` holds counts as opened.
  void ReadEvents(const std::function<bool(pid_t)>& ours);
  // Every round of the phase, right after its records were read:
  // `first_record_seconds` is -1 while none has come (the pages cached now,
  // about once a second), else when the first came (the reads are those
  // cached now, and sampling ends).
  void Round(double first_record_seconds);
  // The last events answered, then the marks gone: an open after this is
  // not held.
  void Close(const std::function<bool(pid_t)>& ours);

  const WatchResult& result() const { return r_; }

 private:
  struct Watched {  // by identity; fd kept open for the page cache
    dev_t dev = 0;
    ino_t ino = 0;
    int fd = -1;
    int64_t size = 0;
  };
  void StartReads(int64_t cached_by_listing, int64_t total);
  void Sample();

  int fd_ = -1;
  uid_t user_;
  std::vector<Watched> watched_;
  WatchResult r_;
  bool sampling_ = false;
  std::chrono::steady_clock::time_point last_sample_{};
};

}  // namespace pilot::supervisor
