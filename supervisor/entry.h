// What pilot-supervisor does once its command line is read (main.cc):
//   RunPilot          the pilot job's task hands over the job's standard
//                     streams on the channel; the supervisor joins the
//                     task's cgroup and runs the workload (Supervise).
//   RunContainerTaskFromChannel  --container-task: the task's stdio and
//                     environment from the channel, then its command in
//                     the pinned image (supervisor/program/container_task.h).
// Each returns the exit status, which also goes back on the channel.
//
// Thread-safety: the supervisor's single thread; these fork.
#pragma once

#include "supervisor/command_line.h"

namespace pilot::supervisor {

int RunPilot(const CommandLine& cl);
int RunContainerTaskFromChannel(const CommandLine& cl);

}  // namespace pilot::supervisor
