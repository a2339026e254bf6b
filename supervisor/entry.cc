#include "supervisor/entry.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "job/task_channel.h"
#include "supervisor/cgroup.h"
#include "supervisor/program/bound_run.h"
#include "supervisor/program/container_task.h"
#include "supervisor/supervise.h"

extern char** environ;

namespace pilot::supervisor {
namespace {

// The task's standard streams onto 0, 1 and 2.
void TakeStdio(const std::array<int, 3>& fds) {
  for (int i = 0; i < 3; ++i) {
    dup2(fds[static_cast<size_t>(i)], i);
    close(fds[static_cast<size_t>(i)]);
  }
}

}  // namespace

int RunPilot(const CommandLine& cl) {
  if (cl.channel >= 0) {
    // The task hands over the job's standard streams once it is ready.
    Result<std::array<int, 3>> fds = job::ReceiveStdio(cl.channel);
    if (!fds.ok()) return 4;
    TakeStdio(*fds);
    JoinCgroupOf(getppid());
  }
  SuperviseOptions o;
  Status prepared = Prepare(cl, environ, &o);
  int rc = 2;
  if (!prepared.ok()) {
    std::fprintf(stderr, "%s\n", prepared.ToString().c_str());
  } else if (cl.bound_run > 0) {
    rc = RunBoundRun(o, cl.bound_run);
  } else {
    rc = Supervise(o);
  }
  if (cl.channel >= 0) (void)job::SendExitStatus(cl.channel, rc);
  return rc;
}

int RunContainerTaskFromChannel(const CommandLine& cl) {
  std::vector<std::string> env;
  if (cl.channel >= 0) {
    Result<std::array<int, 4>> fds = job::ReceiveStdioAndEnv(cl.channel);
    if (!fds.ok()) return 4;
    TakeStdio({(*fds)[0], (*fds)[1], (*fds)[2]});
    Result<std::vector<std::string>> read = ReadEnvEntries((*fds)[3]);
    close((*fds)[3]);
    if (!read.ok()) {
      // Without the task's environment its rank is unknown: nothing runs.
      std::fprintf(stderr, "pilot: container task: the task's environment: %s\n",
                   read.status().ToString().c_str());
      (void)job::SendExitStatus(cl.channel, 1);
      return 1;
    }
    env = std::move(read).value();
    JoinCgroupOf(getppid());
  } else {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  }
  SuperviseOptions o;
  Status prepared = Prepare(cl, environ, &o);
  int rc = 1;
  if (!prepared.ok()) {
    std::fprintf(stderr, "pilot: %s\n", prepared.ToString().c_str());
  } else if (!o.run_as) {
    std::fprintf(stderr, "pilot: container task: runs as root only\n");
  } else {
    ContainerTaskInput in;
    in.job_id = cl.job_id;
    in.step_id = cl.step_id;
    in.task_id = cl.task_id;
    in.node = cl.node;
    in.run_as = *o.run_as;
    in.policy = &o.policy;
    in.env = std::move(env);
    in.command = cl.command;
    rc = RunContainerTask(in);
  }
  if (cl.channel >= 0) (void)job::SendExitStatus(cl.channel, rc);
  return rc;
}

}  // namespace pilot::supervisor
