#include "supervisor/cgroup.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace pilot::supervisor {
namespace {

// The unified hierarchy's path of a process ("" when it has none).
std::string UnifiedPath(const std::string& proc_cgroup) {
  std::ifstream in(proc_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

}  // namespace

void JoinCgroupOf(pid_t pid) {
  const std::string theirs = UnifiedPath("/proc/" + std::to_string(pid) + "/cgroup");
  const std::string mine = UnifiedPath("/proc/self/cgroup");
  if (theirs.empty() || theirs == mine || theirs.find("..") != std::string::npos) return;
  std::ofstream procs("/sys/fs/cgroup" + theirs + "/cgroup.procs");
  procs << getpid() << "\n";
  procs.flush();
  if (!procs) {
    std::fprintf(stderr, "pilot: supervisor: cannot join the task's cgroup %s\n", theirs.c_str());
  }
}

}  // namespace pilot::supervisor
