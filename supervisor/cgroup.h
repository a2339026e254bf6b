// The supervisor joins its task's control group (cgroup v2), so that it and
// every workload process it starts are confined and accounted like the
// task (devices, memory, CPU set) and cleaned up with the step: it is
// forked before Slurm places the task into the step's group.
//
// Best effort: without a unified hierarchy, or when the groups are the
// same already, nothing happens; a failure is logged, not fatal (process
// tracking by the process tree still covers the supervisor).
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace pilot::supervisor {

void JoinCgroupOf(pid_t pid);

// The memory this process and what it starts may use: the smallest
// memory.max of its cgroup and the groups above it (cgroup v2), else the
// node's MemTotal; 0 when neither could be read.
int64_t MemoryLimitBytes();

}  // namespace pilot::supervisor
