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

#include "core/status.h"
#include "core/verdict.h"
#include "job/state_layout.h"

namespace pilot::job {

// The instance a verdict is filed under: v.instance, or the digits of
// v.issued ("2026-11-30T04:05:06Z" -> "20261130040506") when it has none.
std::string VerdictInstance(const Verdict& v);

struct StoredVerdictFile {
  std::string path;      // STATE/verdicts/JOBID.json
  std::string moved_to;  // where the replaced verdict went ("" = there was none)
  bool kept = false;     // the stored verdict is of the same instance: nothing written
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
// Errors: kIoError/kPermission when a file cannot be moved or written (the
// previous verdict is then where it was).
Result<StoredVerdictFile> StoreVerdict(const StateLayout& layout, int64_t job_id,
                                       const std::string& instance, std::string_view body);

}  // namespace pilot::job
