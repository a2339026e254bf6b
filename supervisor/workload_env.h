// The environment a workload process starts with: built by the supervisor
// from the job's environment by an allow-list, never inherited wholesale.
//
// Passed from the job (the user chose them; they shape the run, not the
// evidence): SLURM_* (except SLURM_PILOT_*), CUDA_VISIBLE_DEVICES,
// ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, NCCL_*,
// GLOO_SOCKET_IFNAME, OMP_NUM_THREADS, MKL_NUM_THREADS, TZ, LANG, LC_*,
// TMPDIR, PILOT_MASTER_PORT; PILOT_RUNNER_TEST_* only when the policy's
// allow_test_switches is true.
// Set by the supervisor: PATH, HOME, USER, LOGNAME (from the password
// database), SLURM_PILOT_ACTIVE (the job id) and SLURM_PILOT_INSTANCE.
// Everything else is dropped: LD_PRELOAD and the other LD_* variables, the
// runner's internal variables (PILOT_DEVICE_BASELINE, PILOT_RANK, ...),
// PYTHON*, whatever the job carried.
//
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/records/lock.h"

namespace pilot::supervisor {

struct WorkloadEnvInput {
  std::vector<std::string> job_env;  // "NAME=value" as Slurm gave the task
  bool allow_test_switches = false;
  int64_t job_id = 0;
  std::string instance;
  std::string user;
  std::string home;
};

struct WorkloadEnv {
  std::vector<std::string> env;            // complete, "NAME=value"
  std::vector<std::string> passed;         // names taken from the job
  std::vector<std::string> test_switches;  // PILOT_RUNNER_TEST_* passed
  std::vector<std::string> dropped;        // names of the job's left out
};

WorkloadEnv BuildWorkloadEnv(const WorkloadEnvInput& in);

// The value of `name` in a list of "NAME=value" entries, the first entry
// winning as above; "" when absent.
std::string EnvValue(const std::vector<std::string>& env, std::string_view name);
// Sets `name`: its first entry replaced, else one appended.
void SetEnvValue(std::vector<std::string>* env, std::string_view name, std::string_view value);

// The job's GPUs on this node by node-wide index ("0,3"), which the
// supervisor samples and a program's ranks are counted by: the lock's
// job.gpus, which the prolog took from slurmd's SLURM_JOB_GPUS (root's
// word). Only for a lock written before that field existed, the job's own
// SLURM_JOB_GPUS, which the user's --export can set. "" = no list.
std::string JobGpuList(const Lock& lock, const std::vector<std::string>& job_env);
// Such a list's entries, trimmed ("0, 3" -> "0", "3"; an empty entry
// between commas kept, for the caller to refuse); none for "".
std::vector<std::string> SplitGpuList(std::string_view list);

}  // namespace pilot::supervisor
