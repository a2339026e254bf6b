// A pilot's work folder on the state directory's file system may not take
// that file system below the site's floor (pilot.conf(5), state_floor_mb):
// the locks and verdicts of every user's pilots live there. Where the work
// folder lies on the state file system (no work_root elsewhere), the
// supervisor looks about every two seconds: when the free space is below
// the floor and this pilot's own work folder holds more than the floor
// (so that a small pilot beside the one that filled it is left alone), the
// pilot is ended with the reason, its verdict a NO-GO; the epilog then
// removes the folder and the space is back.
//
// Thread-safety: one per supervisor, from its single thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "job/state_layout.h"

namespace pilot::supervisor {

// The bytes the files under `dir` take on its file system (allocated
// blocks, links not followed, other file systems not entered), counting at
// most `max_entries` entries. nullopt when `dir` cannot be walked.
std::optional<int64_t> FolderBytes(const std::string& dir, int64_t max_entries = 200000);

class WorkGuard {
 public:
  // `floor_bytes` 0: no floor, nothing to guard.
  WorkGuard(const job::StateLayout& state, const std::string& work_dir, int64_t floor_bytes);

  // Whether the work folder shares the state directory's file system.
  bool guarding() const { return shared_; }
  // About every two seconds (else nullopt at once): why the pilot must end
  // now, or nullopt.
  std::optional<std::string> Check();

 private:
  job::StateLayout state_;
  std::string work_dir_;
  int64_t floor_ = 0;
  bool shared_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace pilot::supervisor
