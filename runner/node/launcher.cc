// The table of node-stage launchers and their shared helpers.
#include "runner/node/launcher.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pilot::runner {

// Each launcher's file defines its maker.
std::unique_ptr<Launcher> MakeSrunLauncher();
std::unique_ptr<Launcher> MakeLocalLauncher();

namespace {

bool InSlurmJob(int nproc) { return std::getenv("SLURM_JOB_ID") != nullptr && nproc == 0; }
bool Always(int /*nproc*/) { return true; }

struct LauncherKind {
  const char* name;               // parallel.launcher's value
  bool (*automatic)(int nproc);   // whether "auto" picks it
  std::unique_ptr<Launcher> (*make)();
};

// The launchers, in the order "auto" tries them; the last is the fallback.
//
// A new launcher is one new file plus one schema value:
//   1. runner/node/<name>_launcher.cc: a class implementing Launcher (start
//      the ranks with the request's arguments and environment, add each
//      rank's PILOT_* or scheduler variables that core/records/hostlist.h
//      reads, name the failed rank) and its Make<Name>Launcher(); the
//      library picks the file up by its folder.
//   2. Its row here (with the maker's declaration above), and its value in
//      parallel.launcher's choices (core/config/config_schema.cc) and in
//      pilot.toml(5).
constexpr LauncherKind kLaunchers[] = {
    {"srun", InSlurmJob, MakeSrunLauncher},
    {"local", Always, MakeLocalLauncher},
};

}  // namespace

std::unique_ptr<Launcher> ChooseLauncher(const std::string& setting, int nproc) {
  for (const LauncherKind& k : kLaunchers) {
    if (setting == "auto" ? k.automatic(nproc) : setting == k.name) return k.make();
  }
  return std::end(kLaunchers)[-1].make();
}

pid_t SpawnProcess(const std::string& exe, const std::vector<std::string>& args,
                   const std::vector<std::string>& env, int stderr_fd) {
  std::vector<std::string> a = args, e = env;
  std::vector<char*> argv, envp;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : e) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stderr_fd, STDERR_FILENO);
  const int rc = exe.find('/') == std::string::npos
                     ? ::posix_spawnp(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data())
                     : ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    std::fprintf(stderr, "pilot: node: cannot start %s: %s\n", exe.c_str(), std::strerror(rc));
    return -1;
  }
  return pid;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "status " + std::to_string(status);
}

}  // namespace pilot::runner
