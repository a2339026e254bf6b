// Storing a job's verdict without losing the one before it.
//
// STATE/verdicts/JOBID.json holds the latest verdict of a job. A job that
// runs its pilot again (a requeued job: a new pilot instance, a new lock)
// gets a new verdict; the one it replaces moves to
// STATE/verdicts/history/JOBID-INSTANCE.json first, and no history file is
// ever overwritten. An epilog that runs twice for the same instance keeps
// the verdict stored first.
//
// Thread-safety: no shared state; the epilogs of one job run on one node
// (job/state_layout.h), one after the other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/records/verdict.h"
#include "job/reserve.h"
#include "job/state_layout.h"

namespace pilot::job {

// The instance a verdict is filed under: v.instance, or the digits of
// v.issued ("2026-11-30T04:05:06Z" -> "20261130040506") when it has none.
std::string VerdictInstance(const Verdict& v);

struct StoredVerdictFile {
  std::string path;      // STATE/verdicts/JOBID.json
  std::string moved_to;  // where the replaced verdict went ("" = there was none)
  bool kept = false;     // the stored verdict is of the same instance: nothing written
  bool space_used = false;  // written into the space the prolog set aside
  std::string note;      // what happened that the caller should log ("" = nothing)
};

// Stores `body` (a verdict of instance `instance`, VerdictInstance()) as
// STATE/verdicts/JOBID.json, atomically, root's rights, mode 0644:
//   - a stored verdict of another instance (or one that no longer parses,
//     filed as "unreadable") first moves into the history folder (made
//     0755 when missing) under VerdictHistoryFile(job, its instance), or
//     the first free name with a clash number: never over a file;
//   - a stored verdict of the same instance is kept and nothing is written
//     (kept = true, note says so).
// `space` (JobPaths::verdict_space, "" = none): the file the prolog set
// aside for this verdict (job/reserve.h). The verdict is written into its
// blocks (pwrite from 0, cut to the verdict's size, 0644, fsync) and the
// file renamed into place, so no free block is needed while the verdict
// fits it (space_used = true). Without that file, or when writing into it
// fails, it is removed (its blocks freed) and the verdict written anew
// through WriteWithReserve (job/reserve.h): on a full file system the state
// directory's reserve is released once, `log` told so. The space is removed
// on every path that does not store it, so a caller's next write (the
// unstored queue) can take its blocks.
// Errors: kIoError/kPermission when a file cannot be moved or written (the
// previous verdict is then where it was).
Result<StoredVerdictFile> StoreVerdict(const StateLayout& layout, int64_t job_id,
                                       const std::string& instance, std::string_view body,
                                       const LogLine& log = nullptr, const std::string& space = "");

// Before a new start of job `job_id` (instance `instance`) runs: a verdict
// stored for the job id, or one queued for `pilot flush` to store
// (QueueUnstoredVerdict), that is not of `instance` belongs to an earlier
// start of the id (a requeue, or a job id Slurm hands out again after its
// ids restarted), so it moves into the history folder now, as StoreVerdict
// would move it later: `pilot verdict JOBID` and `pilot grant JOBID` never
// take it for the new job's, and a flush cannot put it back over the new
// one. A moved queued verdict becomes 0644 there like every verdict.
struct RetiredVerdicts {
  std::vector<std::string> moved_to;  // where each one went (empty: none to move)
  Status error;  // kIoError naming one that could not be moved (it stays where it was)
};
RetiredVerdicts RetireEarlierVerdicts(const StateLayout& layout, int64_t job_id,
                                      const std::string& instance);

// A signed verdict StoreVerdict could not store, kept for `pilot flush`:
// written (WriteWithReserve, root, 0600) as layout.UnstoredFile(job_id),
// the folder made (root, 0700) when missing; a queued one of the same job is
// replaced. Returns the file's path. Errors: kIoError/kPermission.
Result<std::string> QueueUnstoredVerdict(const StateLayout& layout, int64_t job_id,
                                         std::string_view body, const LogLine& log = nullptr);

struct StoredQueued {
  int stored = 0;              // moved into the store (or one of the same instance was there)
  int kept = 0;                // still queued
  std::vector<Status> errors;  // one per kept file
};
// Stores every verdict queued by QueueUnstoredVerdict (StoreVerdict with the
// instance the verdict names) and removes each stored one from the queue;
// a file that is not a verdict, or one StoreVerdict refuses, stays. A
// missing queue folder is an empty queue. Errors: kIoError (the folder
// cannot be read).
Result<StoredQueued> StoreQueuedVerdicts(const StateLayout& layout);

}  // namespace pilot::job
