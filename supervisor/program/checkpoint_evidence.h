// What root establishes about a user's program's checkpoint (pilot-program(7),
// CHECKPOINT): the folder the reference process saved step K into, listed
// and hashed as the job's user (`pilot-runner verify --program-checkpoint`),
// the listing kept in the job's root-owned folder for the epilog; which of
// the listed files are step K's and which the reference saved later; and
// which of them the resumed process opened and read, from the phase's
// watch (supervisor/program/checkpoint_watch.h).
//
// Thread-safety: ListCheckpoint forks (job::RunCommand); call it from the
// supervisor's single thread. The rest is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/records/results.h"
#include "job/subprocess.h"
#include "supervisor/program/group.h"

namespace pilot::supervisor {

struct ListCheckpointInput {
  std::string dir;      // the reference's PILOT_CHECKPOINT_DIR
  int64_t at_step = 0;  // K (PILOT_CHECKPOINT_STEP), for the messages
  // When the reference had saved step K (SavedBy): a listed file whose
  // status changed later (its ctime, which its owner cannot set back) is a
  // later save, not the checkpoint the resumed process is to restore.
  std::optional<double> saved_by;
  std::string runner;  // pilot-runner
  std::optional<job::RunAs> run_as;
  std::string user, home;  // the helper's clean environment
  double timeout_seconds = 600;
  std::string list_file;  // root's copy of the listing (job::JobPaths::CheckpointFiles)
};

struct CheckpointListing {
  int files = 0;      // every file listed
  int64_t bytes = 0;  // their sizes
  // The regular files of step K (path under dir, bytes): what the resumed
  // process is to read; every listed one when the reference rewrote them all.
  std::vector<std::pair<std::string, int64_t>> at_step;
  CheckpointSaves saves;
};

// Lists and hashes the checkpoint folder as the job's user and keeps the
// listing in in.list_file (a failure to keep it is logged, not fatal). An
// empty folder is a listing of no files (EmptyCheckpoint says so).
// Errors (detail(): the sentence for results.json): kNotFound when the
// folder is missing or not a directory; kIoError when it could not be
// listed.
Result<CheckpointListing> ListCheckpoint(const ListCheckpointInput& in);

// The sentence for a listing of no files.
std::string EmptyCheckpoint(const std::string& dir);

// When the reference process had saved the checkpoint of step `k`: the
// arrival of each rank's first record past k (the latest of them), on the
// system clock. nullopt when no rank reported a step past k.
std::optional<double> SavedBy(const GroupResult& g, int64_t k);

// Which of the listed files (`at_step`, watched in that order) a process of
// the resumed phase opened, and how much of them it read before its first
// record, as its watch saw it.
CheckpointRead CheckpointReadOf(const std::vector<std::pair<std::string, int64_t>>& at_step,
                                const GroupResult& resumed);

}  // namespace pilot::supervisor
