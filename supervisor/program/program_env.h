// The environment of one process of a user's program (pilot-program(7),
// ENVIRONMENT). The program is the user's own code running as the user: it
// gets the job's whole environment, as srun's --export=ALL gives it (the
// site's MPI, fabric and accelerator variables, tokens, caches), so that a
// program that runs in the job runs in the pilot. What the pilot owns is
// not the job's to set: its own PILOT_* variables, the supervisor's
// SLURM_PILOT_* and the rank variables each process gets. Nor are Python's
// ways to load code from outside the pins (the job's PYTHONPATH, PYTHONHOME,
// PYTHONUSERBASE, PYTHONSTARTUP, and the user's site folder: PYTHONNOUSERSITE
// is always 1); program.env, which is pinned, may set the first three. The pilot's own
// helpers that run as the user (listing and verifying the checkpoint) keep
// a clean environment.
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.h"

namespace pilot::supervisor {

// The workload's base environment, then the job's whole environment but
// the variables the pilot owns (PILOT_*, SLURM_PILOT_*), then the pilot's
// variables and the rank's.
struct ProgramEnvInput {
  std::vector<std::string> base_env;
  std::vector<std::string> job_env;
  const Config* cfg = nullptr;
  std::string probe_path;
  std::string stage, process, device;
  int rank = 0, local_rank = 0, world_size = 1, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string metrics, checkpoint_dir, resume_dir;
  int64_t resume_step = 0;  // PILOT_RESUME_STEP (a requeued bound run); 0 = not set
  int64_t seed = 0;
  // The processes the supervisor starts itself (SLURM_PROCID, SLURM_LOCALID
  // and SLURM_NTASKS set as srun would); 0 when srun starts the tasks.
  int tasks = 0;
};
std::vector<std::string> ProgramEnv(const ProgramEnvInput& in);

}  // namespace pilot::supervisor
