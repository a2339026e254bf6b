// The table of node-stage launchers.
#include "launch/launcher.h"

#include <algorithm>
#include <cstdlib>

namespace pilot::launch {

// Each launcher's file defines its maker.
std::unique_ptr<Launcher> MakeSrunLauncher();
std::unique_ptr<Launcher> MakeLocalLauncher();

namespace {

bool InSlurmJob(int nproc, bool in_job) { return in_job && nproc == 0; }
bool Always(int /*nproc*/, bool /*in_job*/) { return true; }

struct LauncherRow {
  const char* name;                           // parallel.launcher's value
  bool (*automatic)(int nproc, bool in_job);  // whether "auto" picks it
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
//   3. Where it applies: DecideNodeLayout (launch/layout.cc) decides the
//      kind and the ranks for both workloads. A user's program: the
//      supervisor builds each phase's processes in PhaseRanks
//      (supervisor/program/phase_layout.cc) from the same functions and
//      runs them with RunGroup (supervisor/program/group.h); a kind the
//      program can use gets its case there and its line in
//      pilot-program(7).
//   4. Tests: tests/launch/ for what it builds, tests/runner/node_test.py
//      for ranks it starts.
constexpr LauncherRow kLaunchers[] = {
    {kSrun, InSlurmJob, MakeSrunLauncher},
    {kLocal, Always, MakeLocalLauncher},
};

}  // namespace

std::string LauncherKind(const std::string& setting, int nproc, bool in_slurm_job) {
  for (const LauncherRow& k : kLaunchers) {
    if (setting == "auto" ? k.automatic(nproc, in_slurm_job) : setting == k.name) return k.name;
  }
  return std::end(kLaunchers)[-1].name;
}

std::unique_ptr<Launcher> MakeLauncher(const std::string& kind) {
  for (const LauncherRow& k : kLaunchers) {
    if (kind == k.name) return k.make();
  }
  return std::end(kLaunchers)[-1].make();
}

std::unique_ptr<Launcher> ChooseLauncher(const std::string& setting, int nproc) {
  return MakeLauncher(LauncherKind(setting, nproc, std::getenv("SLURM_JOB_ID") != nullptr));
}

int DefaultNodeProcesses(bool cuda, int visible_gpus, int tasks_per_node, int nodes) {
  const int per_node = cuda ? std::max(1, visible_gpus) : tasks_per_node > 1 ? tasks_per_node : 2;
  return per_node * std::max(1, nodes);
}

std::vector<std::string> LauncherNames() {
  std::vector<std::string> names;
  for (const LauncherRow& k : kLaunchers) names.emplace_back(k.name);
  return names;
}

}  // namespace pilot::launch
