// pilot-prolog: pins everything a pilot job depends on before it runs.
//
// Runs as root on every node of a job (Slurm Prolog= with PrologFlags=Alloc).
// For a pilot job it creates STATE/jobs/JOBID/ (root, 0755) with work/ owned
// by the job's user (0700), copies the submitted config there (read AS THE
// USER, so root never discloses a file the user could not read), checks
// that its sha256 still equals the one recorded at submission, and writes
// lock.json (root, 0644) with: the config's path and hashes, the training
// seed, the container image pinned to a digest (registry tag -> digest, or
// a local image file -> sha256), the sha256 of model and data files (hashed
// as the user), dependency versions (the runner's --versions, Slurm, OS,
// kernel) and the GPU inventory (nvidia-smi, when present).
//
// The work folder is STATE/jobs/JOBID/work, or WORK/JOBID under the
// policy's work_root (job/state_layout.h); after making it the prolog runs
// the policy's work_quota_command (WORK_DIR UID JOBID, as root, time-limited)
// and warns once when work_root shares the state directory's file system.
//
// A user's mistake (changed or invalid config, missing file, unreachable
// registry, a failed quota command, a full work file system) is recorded in
// the lock's `problems` and the prolog succeeds: a failing prolog drains the
// node. A full state file system is met by releasing the state directory's
// reserve (job/reserve.h) and writing again; when even that fails the
// prolog logs it and succeeds without a lock (the task then refuses, the
// epilog issues NO-GO). On the state file system it sets aside the blocks
// of the job's verdict (JobPaths::verdict_space) before the job runs, and
// below the policy's floor of free space (floor_bytes) it records the
// problem state_space_low, for which the task refuses to start the pilot.
// RunProlog returns an error only when the node itself is broken (the
// state folder cannot be made or written for another reason than a full
// file system).
//
// Time bound: every helper runs under a timeout (command_timeout_seconds,
// default 20 s; file hashing hash_timeout_seconds, default 120 s per file)
// cut to what is left of total_timeout_seconds (the policy's
// prolog_timeout_seconds, default 120 s); the registry lookup has its own
// connect/total timeouts and retries (policy [registry]). A prolog thus ends
// within total_timeout + one registry lookup even when everything it asks
// hangs; keep Slurm's PrologEpilogTimeout above that (local-slurm: 300 s).
//
// Thread-safety: single-threaded (forks helpers).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/records/lock.h"
#include "core/base/oci.h"
#include "core/records/policy.h"
#include "core/base/status.h"
#include "job/job_env.h"
#include "job/subprocess.h"

namespace pilot::prolog {

struct PrologOptions {
  std::string state_dir = "/var/lib/slurm-pilot";
  std::string work_root;            // policy work_root ("" = STATE/jobs/JOBID/work)
  std::string work_quota_command;   // policy work_quota_command ("" = none)
  int64_t reserve_bytes = 8 << 20;  // policy state_reserve_mb, in bytes
  // policy state_floor_mb, in bytes: below it a new pilot is refused (the
  // lock problem state_space_low); 0 = no floor.
  int64_t floor_bytes = int64_t{64} << 20;
  std::string runner = "/usr/bin/pilot-runner";
  double command_timeout_seconds = 20;
  double hash_timeout_seconds = 120;
  // All helpers together (policy prolog_timeout_seconds): each helper's
  // limit is cut to what is left; past it, the rest is recorded as a
  // "prolog_timeout" problem instead of being run.
  double total_timeout_seconds = 120;
  size_t max_config_bytes = 1 << 20;
};

// The world the prolog talks to; tests replace parts.
struct PrologDeps {
  // Registry reference "host/repo:tag" -> digest and pinned reference.
  std::function<Result<ResolvedImage>(const std::string& reference)> resolve_image;
  std::function<Result<job::CommandResult>(const job::CommandSpec&)> run = job::RunCommand;
  std::function<int64_t()> now_unix;
};
// Real helpers; the registry lookup follows the policy's [registry] settings.
PrologDeps RealPrologDeps(const Policy& policy);

// Pins a pilot job and writes its lock.json; for a job that names a pilot
// run (job.pilot_run, not a pilot itself) runs BindRun instead. See the
// file comment. REQUIRES: job.is_pilot or job.pilot_run != 0; root.
Status RunProlog(const PrologOptions& opts, const job::JobEnv& job, const PrologDeps& deps);

// The parts of a lock a run identity is made of (RunIdentity), pinned now
// for the config at job.config_path as a pilot's prolog pins them, with
// the job's user's rights; writes nothing.
Lock PinForIdentity(const PrologOptions& opts, const job::JobEnv& job, const PrologDeps& deps);

// A long job bound to a pilot (job/binding.h; prolog/binding.cc): checks it
// against the pilot's grant and writes STATE/runs/JOBID.json. Fails only
// when the state directory cannot be written for another reason than a
// full file system (the job's tasks then refuse: no record).
Status BindRun(const PrologOptions& opts, const job::JobEnv& job, const PrologDeps& deps);

// The seed used when the config leaves training.seed at -1: a mix of the
// job id into [0, 2^31).
int64_t SeedFromJobId(int64_t job_id);

}  // namespace pilot::prolog
