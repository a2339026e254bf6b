// pilot-supervisor: the root process that owns a pilot's evidence. Started
// by the SPANK plugin in the task of a pilot job (spank_plugin/remote.cc),
// it runs the workload's processes as the job's user and writes the
// instance's results.json (supervisor/supervise.h, pilot-supervisor(8)).
#include <signal.h>

#include <cstdio>

#include "core/base/guarded_main.h"
#include "pilot/version.h"
#include "supervisor/command_line.h"
#include "supervisor/entry.h"
#include "supervisor/process.h"

namespace {

void OnStop(int) { pilot::supervisor::RequestStop(); }

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
  signal(SIGPIPE, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  if (cl->container_task) return RunContainerTaskFromChannel(*cl);
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  return RunPilot(*cl);
}

}  // namespace

int main(int argc, char** argv) {
  return pilot::GuardedMain("supervisor", 4, [&] { return Main(argc, argv); });
}
