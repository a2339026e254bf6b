// Where a container's cgroup goes (supervisor/cgroup.h): inside the job's,
// on each layout /proc/self/cgroup can show.
#include "supervisor/cgroup.h"

#include <gtest/gtest.h>

namespace pilot::supervisor {
namespace {

TEST(ContainerCgroupParent, TheJobsGroupOnEachLayout) {
  // cgroup v1 as Slurm's task/cgroup makes it: the memory controller's path.
  EXPECT_EQ(ContainerCgroupParent("12:pids:/slurm/uid_1000/job_7/step_0/task_0\n"
                                  "9:memory:/slurm/uid_1000/job_7/step_0/task_0\n"
                                  "4:cpu,cpuacct:/slurm/uid_1000/job_7/step_0/task_0\n"
                                  "1:name=systemd:/system.slice/slurmd.service\n"),
            "/slurm/uid_1000/job_7/step_0/task_0");
  // A hybrid layout: the memory controller's path, not the unified one's.
  EXPECT_EQ(ContainerCgroupParent("4:memory:/process_api/71bb\n1:cpu:/\n0::/\n"),
            "/process_api/71bb");
  // cgroup v2 alone: the task's leaf holds processes, so its parent.
  EXPECT_EQ(ContainerCgroupParent("0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n"),
            "/system.slice/slurmstepd.scope/job_7/step_0/user");
  // At the root, or unreadable: podman's own default.
  EXPECT_EQ(ContainerCgroupParent("0::/\n"), "");
  EXPECT_EQ(ContainerCgroupParent("0::/init.scope\n"), "");
  EXPECT_EQ(ContainerCgroupParent("4:memory:/\n0::/\n"), "");
  EXPECT_EQ(ContainerCgroupParent(""), "");
  EXPECT_EQ(ContainerCgroupParent("4:memory:/a/../b\n"), "");
  EXPECT_EQ(ContainerCgroupParent("garbage"), "");
}

}  // namespace
}  // namespace pilot::supervisor
