// The table of node-stage launchers.
#include "launch/launcher.h"

#include <algorithm>
#include <cstdlib>

namespace pilot::launch {

// Each launcher's file defines its maker.
std::unique_ptr<Launcher> MakeSrunLauncher();
std::unique_ptr<Launcher> MakeLocalLauncher();

namespace {

bool InSlurmJob(int nproc) { return std::getenv("SLURM_JOB_ID") != nullptr && nproc == 0; }
bool Always(int /*nproc*/) { return true; }

struct LauncherKind {
  const char* name;              // parallel.launcher's value
  bool (*automatic)(int nproc);  // whether "auto" picks it
  std::unique_ptr<Launcher> (*make)();
};

// The launchers, in the order "auto" tries them; the last is the fallback.
//
// A new launcher kind, for both workloads:
//   1. launch/<name>_launcher.cc: a class implementing Launcher (start the
//      ranks with the request's arguments and environment, each rank's
//      variables from SetRankEnv (launch/rank_env.h) or the scheduler's
//      that RankFromEnv reads; name the failed rank) and its
//      Make<Name>Launcher(); the library picks the file up by its folder.
//      What builds a command line or an environment goes into a function
//      of launch/ (as SrunStepArgv, launch/srun.h), not into the class.
//   2. Its row here (with the maker's declaration above), its name beside
//      kLocal and kSrun (launch/launcher.h), and its value in
//      parallel.launcher's choices (core/config/config_schema.cc; the
//      launch tests hold the two lists equal) and pilot.toml(5).
//   3. A user's program: the supervisor builds each phase's processes in
//      ProgramPilot::RunPhase (supervisor/program/program_pilot.cc) from
//      the same functions and runs them with RunGroup
//      (supervisor/program/group.h); a kind the program can use gets its
//      case there and its line in pilot-program(7).
//   4. Tests: tests/launch/ for what it builds, tests/runner/node_test.py
//      for ranks it starts.
constexpr LauncherKind kLaunchers[] = {
    {kSrun, InSlurmJob, MakeSrunLauncher},
    {kLocal, Always, MakeLocalLauncher},
};

}  // namespace

std::unique_ptr<Launcher> ChooseLauncher(const std::string& setting, int nproc) {
  for (const LauncherKind& k : kLaunchers) {
    if (setting == "auto" ? k.automatic(nproc) : setting == k.name) return k.make();
  }
  return std::end(kLaunchers)[-1].make();
}

int DefaultNodeProcesses(bool cuda, int visible_gpus, int tasks_per_node, int nodes) {
  const int per_node = cuda ? std::max(1, visible_gpus) : tasks_per_node > 1 ? tasks_per_node : 2;
  return per_node * std::max(1, nodes);
}

std::vector<std::string> LauncherNames() {
  std::vector<std::string> names;
  for (const LauncherKind& k : kLaunchers) names.emplace_back(k.name);
  return names;
}

}  // namespace pilot::launch
