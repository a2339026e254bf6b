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
#include <string>

namespace pilot::supervisor {

void JoinCgroupOf(pid_t pid);

// Where a container the supervisor starts puts its own cgroup (podman
// --cgroup-parent), so that it stays inside the job's and Slurm's limits and
// cleanup reach it, given the text of /proc/self/cgroup: with cgroup v1
// controllers (a hybrid layout too), the memory controller's path of this
// process; with the unified hierarchy alone, the parent of this process's
// group (v2 lets no group hold processes and children with controllers:
// Slurm's task_N leaf is under step_S/user). "" at the root, where podman's
// own default is as good.
std::string ContainerCgroupParent(const std::string& proc_self_cgroup);
// The same for this process.
std::string ContainerCgroupParent();

// The memory this process and what it starts may use: the smallest
// memory.max of its cgroup and the groups above it (cgroup v2), else the
// node's MemTotal; 0 when neither could be read.
int64_t MemoryLimitBytes();

}  // namespace pilot::supervisor
