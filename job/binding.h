// The binding of a long job to its pilot: a job that names a pilot run
// (sbatch --pilot-run=JOBID, spank_pilot(8)) runs under that pilot's grant
// only as the run that was piloted.
//
// Two sides, both root's. etc/job_submit.lua admits such a job over the
// policy's time limit only into the user's pilot_JOBID reservation, within
// the grant record's nodes and duration. On the node, before any task, the
// prolog computes the long job's run identity again, with the same code
// that pinned the pilot (the pilot's config path and submit folder from its
// lock, read as the user), compares it with the identity recorded in the
// grant, and writes a run record, STATE/runs/JOBID.json (root, 0644). The
// plugin's remote side refuses every task of a job whose record refuses it
// (spank_plugin/task_role.h): the node is not drained, the job's command
// never runs, and `pilot verdict PILOTJOB` lists the record.
//
// What the identity covers is RunIdentity's (core/records/lock.h): the
// config's bytes, the container digest, the data files' sha256, the
// program.pin files and folders with their git commit and dirtiness, and
// the hub revisions. The node count is not compared here: the grant's
// bound on it is the submit check's.
//
// Thread-safety: pure functions, except RunRefusal and RunsOfPilot (file
// reads).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/json_util.h"
#include "core/base/status.h"

namespace pilot::job {

inline constexpr char kRunSchema[] = "slurm-pilot/run/1";
inline constexpr char kRunAdmitted[] = "admitted";
inline constexpr char kRunRefused[] = "refused";

struct RunRecord {
  int64_t job_id = 0;     // the long job
  int64_t pilot_job = 0;  // the pilot it named
  std::string user;
  uid_t uid = 0;
  std::string host;      // the node whose prolog checked it
  std::string decision;  // kRunAdmitted | kRunRefused
  // Why it was refused, one sentence each ("pin train.py: sha256:3f2a9c...,
  // piloted sha256:9b1c0a..."); empty when admitted.
  std::vector<std::string> reasons;
  std::string identity_sha256;  // the long job's identity ("" = not computed)
  std::vector<std::string> identity_lines;
  std::string piloted_sha256;  // the grant's
  std::string checked_at;      // RFC 3339 UTC
};

// The record as a JSON value, as pretty JSON ending in a newline, and its
// strict reading. Errors: kCorrupt.
Json RunRecordJson(const RunRecord& r);
std::string RunRecordToJson(const RunRecord& r);
Result<RunRecord> ParseRunRecord(std::string_view text, const std::string& label);

// The parts of two run identities' lines (LockIdentity::lines) that differ,
// one sentence per part, the node count left out: a part is "config",
// "container", "file ROLE PATH", "pin NAME", "hub_model NAME" or
// "hub_dataset NAME", e.g. "pin train.py: sha256:3f2a9c0d1e2f... commit
// 1a2b..., piloted sha256:9b1c0a7e6d5c...", "pin data/: not in the run,
// piloted sha256:...". Empty when they agree.
std::vector<std::string> IdentityDifferences(const std::vector<std::string>& piloted,
                                             const std::vector<std::string>& now);

// The run record at `path` of job `job_id` of `uid`: root's plain file,
// naming that job and uid. Errors: kNotFound (no record), kPermission (not
// root's plain file), kCorrupt (does not read, another job's), each a
// sentence in the detail.
Result<RunRecord> ReadRunRecordOf(const std::string& path, int64_t job_id, uid_t uid);

// The batch script a bound run is submitted with (`pilot run PILOT`,
// pilot(1)): the plugin runs the pilot's program.command in place of it,
// and etc/job_submit.lua, which spells the same text, admits no other
// script for a job naming a pilot. Run by itself (a node without the
// plugin) it only fails.
std::string BoundRunScript(int64_t pilot_job);

// What the plugin's remote side does with the run record at `path` for
// job `job_id` of `uid`: "" to let the tasks run (no record, or one that
// admits the job), else the message every task refuses with. A record that
// is not root's plain file, names another job or uid, or cannot be read is
// refused too: a bound job runs only as its prolog admitted it.
// `named_run`: whether the job named a pilot run (its environment), so that
// a missing record refuses (the prolog could not check it).
std::string RunRefusal(const std::string& path, int64_t job_id, uid_t uid, bool named_run);

// The run records under `runs_dir` that name pilot job `pilot_job`, by
// long job id; files that are not root's plain files or do not parse are
// left out. Never fails: a folder that cannot be read gives none.
std::vector<RunRecord> RunsOfPilot(const std::string& runs_dir, int64_t pilot_job);

}  // namespace pilot::job
