// pilot-supervisor's work for one pilot instance: run the workload's
// phases as the job's user, judge what only two processes together can
// show (the restore), and write the instance's results.json into the job's
// root-owned folder.
//
//   1. single   RUNNER run --stage single --supervised: reference steps,
//               memory, eval, checkpoint at step K (reported complete:
//               the supervisor hashes its manifest.json, as the user)
//   2. restore  RUNNER run --resume-from CKPT: a fresh process restores K
//               and resumes to N; the supervisor compares its losses with
//               the reference's from step 1's report (core/decide/restore_check.h)
//   3. node     RUNNER run --stage node (stage "all" after 1-2 passed, or
//               stage "node")
// Each report arrives on a pipe only the supervisor reads and is parsed
// strictly (core/records/results.h); the supervisor's own clock, exit statuses and
// NVML samples go into results.json's "supervisor" member.
//
// Thread-safety: process-level (forks).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/records/policy.h"
#include "job/subprocess.h"

namespace pilot::supervisor {

struct SuperviseOptions {
  int64_t job_id = 0;
  std::optional<job::RunAs> run_as;  // the job's user; nullopt = the caller
  std::string home;                  // the user's home
  std::string runner;                // pilot-runner
  std::string stage = "all";         // single | node | all
  std::string out;                   // workload --out ("" = the job's work folder)
  std::string cwd = "/";             // the job's working directory
  std::vector<std::string> job_env;  // "NAME=value", as Slurm gave the task
  Policy policy;
};

// Returns the pilot's exit status (pilot-runner(1)'s codes); results.json
// is written whenever the job's folder can be written.
int Supervise(const SuperviseOptions& opts);

}  // namespace pilot::supervisor
