// The pilot of a user's own program ([program] in pilot.toml,
// pilot-program(7)), run by the supervisor:
//
//   single  reference  one process, steps 1..N, checkpoint at K into
//                      PILOT_CHECKPOINT_DIR; then the supervisor lists and
//                      hashes that folder as the user (pilot-runner verify
//                      --program-checkpoint) into the job's root-owned folder
//           resumed    a fresh process with PILOT_RESUME_DIR: must report
//                      K+1 first and run to N; compared step by step
//   node    the same pair with one process per rank (launcher "pilot",
//           torchrun's variables) or one process that starts its own
//           workers (launcher "none"), when more than one rank is asked for
//
// Every failure becomes a sentence in results.json (stages.single.failure,
// .restore.detail, stages.node.failure, program.problems): the verdict
// names it; nothing the program does makes the supervisor fail.
//
// Thread-safety: process-level (forks); the supervisor's single thread.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/lock.h"
#include "core/records/results.h"
#include "job/state_layout.h"
#include "supervisor/supervise.h"

namespace pilot::supervisor {

struct ProgramPilotInput {
  const Config* cfg = nullptr;
  const Lock* lock = nullptr;
  const SuperviseOptions* opts = nullptr;
  std::vector<std::string> base_env;  // the allow-listed workload environment
  std::string out;                    // the job's work folder (the user's)
  job::JobPaths job;                  // the job's root-owned folder and its files
  std::function<void()> tick;         // device memory sampling
  // The job's GPUs' mean utilization (0..1) between two times; nullopt
  // without samples (no NVML, a CPU pilot). May be empty.
  std::function<std::optional<double>(std::chrono::steady_clock::time_point,
                                      std::chrono::steady_clock::time_point)>
      device_utilization;
};

// Fills res->single, res->node, res->program and info->restore_compared;
// returns pilot-runner(1)'s exit status for the run (0 ok, 1 a check
// failed, 3 out of memory, 4 the supervisor could not run it).
int RunProgramPilot(const ProgramPilotInput& in, Results* res, SupervisorInfo* info);

}  // namespace pilot::supervisor
