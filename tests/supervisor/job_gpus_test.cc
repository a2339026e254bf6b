// The GPUs the supervisor samples, and a program's rank count, come from
// the lock (the prolog's record of slurmd's SLURM_JOB_GPUS), not from the
// job's own environment, which the user's --export sets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "supervisor/device_memory.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

std::vector<DeviceMemorySample> FourDevices() {
  std::vector<DeviceMemorySample> all;
  for (int i = 0; i < 4; ++i) all.push_back({i, "GPU-" + std::to_string(i), 1000 * (i + 1), 8000});
  return all;
}

// Proves: the lock's list wins over the job's SLURM_JOB_GPUS, an empty one
// too (a job without GPUs cannot name an idle device to be sampled).
TEST(JobGpuList, TheLockWinsOverTheJobsEnvironment) {
  Lock lock;
  lock.job.gpus = "2,3";
  const std::vector<std::string> env = {"SLURM_JOB_GPUS=1", "CUDA_VISIBLE_DEVICES=1"};
  EXPECT_EQ(JobGpuList(lock, env), "2,3");
  lock.job.gpus = "";
  EXPECT_EQ(JobGpuList(lock, env), "");
}

// Proves: only a lock written before job.gpus existed falls back to the
// job's SLURM_JOB_GPUS (the behaviour before the field).
TEST(JobGpuList, AnOlderLockFallsBackToTheJobsVariable) {
  Lock older;
  EXPECT_EQ(JobGpuList(older, {"SLURM_JOB_GPUS=1"}), "1");
  EXPECT_EQ(JobGpuList(older, {}), "");
}

// Proves: the samples kept are exactly those the list names; "" keeps all.
TEST(SamplesOf, KeepsTheListedDevicesOnly) {
  const std::vector<DeviceMemorySample> all = FourDevices();
  std::vector<DeviceMemorySample> two = SamplesOf(all, "3, 1");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].index, 3);
  EXPECT_EQ(two[1].index, 1);
  EXPECT_EQ(SamplesOf(all, "").size(), 4u);
  EXPECT_TRUE(SamplesOf(all, "7,x,").empty()) << "names of no device keep nothing";
}

}  // namespace
}  // namespace pilot::supervisor
