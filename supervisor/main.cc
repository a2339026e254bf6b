// pilot-supervisor: the root process that owns a pilot's evidence. Started
// by the SPANK plugin in the task of a pilot job (spank_plugin/remote.cc),
// it runs the workload's processes as the job's user and writes the
// instance's results.json (supervisor/supervise.h, pilot-supervisor(8)).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/records/policy.h"
#include "job/task_channel.h"
#include "pilot/version.h"
#include "supervisor/cgroup.h"
#include "supervisor/command_line.h"
#include "supervisor/process.h"
#include "supervisor/program/container_task.h"
#include "supervisor/supervise.h"

extern char** environ;

namespace {

void OnStop(int) { pilot::supervisor::RequestStop(); }

// --container-task: the task's stdio and environment from the channel,
// then its command in the pinned image (supervisor/program/container_task.h).
int ContainerTask(const pilot::supervisor::CommandLine& cl) {
  using namespace pilot::supervisor;
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  std::vector<std::string> env;
  if (cl.channel >= 0) {
    pilot::Result<std::array<int, 4>> fds = pilot::job::ReceiveStdioAndEnv(cl.channel);
    if (!fds.ok()) return 4;
    for (int i = 0; i < 3; ++i) {
      dup2((*fds)[static_cast<size_t>(i)], i);
      close((*fds)[static_cast<size_t>(i)]);
    }
    pilot::Result<std::vector<std::string>> read = ReadEnvEntries((*fds)[3]);
    close((*fds)[3]);
    if (!read.ok()) {
      // Without the task's environment its rank is unknown: nothing runs.
      std::fprintf(stderr, "pilot: container task: the task's environment: %s\n",
                   read.status().ToString().c_str());
      (void)pilot::job::SendExitStatus(cl.channel, 1);
      return 1;
    }
    env = std::move(read).value();
    JoinCgroupOf(getppid());
  } else {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  }
  SuperviseOptions o;
  pilot::Status prepared = Prepare(cl, environ, &o);
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
  if (cl.channel >= 0) (void)pilot::job::SendExitStatus(cl.channel, rc);
  return rc;
}

int Main(int argc, char** argv) {
  using namespace pilot::supervisor;
  pilot::Result<CommandLine> cl = ParseCommandLine(argc, argv);
  if (!cl.ok()) {
    std::fprintf(stderr, "%s\n", cl.status().ToString().c_str());
    return 2;
  }
  if (cl->version) {
    std::printf("pilot-supervisor %s\n", PILOT_VERSION_STRING);
    return 0;
  }
  if (cl->help) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (cl->container_task) return ContainerTask(*cl);
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  if (cl->channel >= 0) {
    // The task hands over the job's standard streams once it is ready.
    pilot::Result<std::array<int, 3>> fds = pilot::job::ReceiveStdio(cl->channel);
    if (!fds.ok()) return 4;
    for (int i = 0; i < 3; ++i) {
      dup2((*fds)[static_cast<size_t>(i)], i);
      close((*fds)[static_cast<size_t>(i)]);
    }
    JoinCgroupOf(getppid());
  }
  SuperviseOptions o;
  pilot::Status prepared = Prepare(*cl, environ, &o);
  int rc = 2;
  if (!prepared.ok()) {
    std::fprintf(stderr, "%s\n", prepared.ToString().c_str());
  } else {
    rc = Supervise(o);
  }
  if (cl->channel >= 0) (void)pilot::job::SendExitStatus(cl->channel, rc);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pilot: supervisor: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "pilot: supervisor: internal error: unknown exception\n");
  }
  return 4;
}
