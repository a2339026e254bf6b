// The workload's environment: an allow-list of the job's, never the rest.
#include "supervisor/workload_env.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pilot::supervisor {
namespace {

bool HasWorkloadEnv(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

WorkloadEnvInput InputWorkloadEnv() {
  WorkloadEnvInput in;
  in.job_id = 42;
  in.instance = "abc";
  in.user = "alice";
  in.home = "/home/alice";
  in.job_env = {"SLURM_JOB_ID=42",          "SLURM_PILOT_ACTIVE=1",
                "SLURM_PILOT_CONFIG=/x",    "CUDA_VISIBLE_DEVICES=0,1",
                "NCCL_DEBUG=INFO",          "LD_PRELOAD=/evil.so",
                "LD_LIBRARY_PATH=/evil",    "PILOT_DEVICE_BASELINE=999",
                "PILOT_RANK=3",             "PYTHONPATH=/tmp",
                "PATH=/home/alice/bin",     "HOME=/elsewhere",
                "PILOT_RUNNER_TEST_SKIP_RESTORE=optimizer", "OMP_NUM_THREADS=4",
                "SLURM_JOB_ID=43",          "garbage",  "=nameless"};
  return in;
}

TEST(WorkloadEnv, PassesTheAllowListAndSetsItsOwn) {
  WorkloadEnv e = BuildWorkloadEnv(InputWorkloadEnv());
  for (const char* kept : {"SLURM_JOB_ID=42", "CUDA_VISIBLE_DEVICES=0,1", "NCCL_DEBUG=INFO",
                           "OMP_NUM_THREADS=4", "PATH=/usr/local/bin:/usr/bin:/bin",
                           "HOME=/home/alice", "USER=alice", "LOGNAME=alice",
                           "SLURM_PILOT_ACTIVE=42", "SLURM_PILOT_INSTANCE=abc"}) {
    EXPECT_TRUE(HasWorkloadEnv(e.env, kept)) << kept;
  }
  for (const char* gone : {"SLURM_PILOT_ACTIVE=1", "SLURM_PILOT_CONFIG=/x", "LD_PRELOAD=/evil.so",
                           "LD_LIBRARY_PATH=/evil", "PILOT_DEVICE_BASELINE=999", "PILOT_RANK=3",
                           "PYTHONPATH=/tmp", "PATH=/home/alice/bin", "HOME=/elsewhere",
                           "SLURM_JOB_ID=43", "garbage", "=nameless",
                           "PILOT_RUNNER_TEST_SKIP_RESTORE=optimizer"}) {
    EXPECT_FALSE(HasWorkloadEnv(e.env, gone)) << gone;
  }
  EXPECT_TRUE(HasWorkloadEnv(e.dropped, "LD_PRELOAD"));
  EXPECT_TRUE(HasWorkloadEnv(e.dropped, "PILOT_RUNNER_TEST_SKIP_RESTORE"));
  EXPECT_TRUE(e.test_switches.empty());
  EXPECT_TRUE(HasWorkloadEnv(e.passed, "NCCL_DEBUG"));
  EXPECT_FALSE(HasWorkloadEnv(e.passed, "PATH"));
}

TEST(WorkloadEnv, TestSwitchesOnlyWhenThePolicyAllows) {
  WorkloadEnvInput in = InputWorkloadEnv();
  in.allow_test_switches = true;
  WorkloadEnv e = BuildWorkloadEnv(in);
  EXPECT_TRUE(HasWorkloadEnv(e.env, "PILOT_RUNNER_TEST_SKIP_RESTORE=optimizer"));
  EXPECT_EQ(e.test_switches, std::vector<std::string>{"PILOT_RUNNER_TEST_SKIP_RESTORE"});
  EXPECT_FALSE(HasWorkloadEnv(e.env, "LD_PRELOAD=/evil.so"));
}

}  // namespace
}  // namespace pilot::supervisor
