// The process table as /proc shows it, for the supervisor's phases of a
// user's program: a process's parent and command, its owner, the processes
// descending from one, the resident bytes of process groups.
//
// Thread-safety: reads /proc only; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace pilot::supervisor {

// The parent of `pid` and its command name (the part of /proc/PID/stat in
// parentheses); false when the process is gone.
bool ReadStat(pid_t pid, long* ppid, std::string* comm);

// The owner of /proc/PID (the process's real uid); -1 when it is gone.
uid_t UidOf(pid_t pid);

// "pid 123 (python3), uid 1000": a process named for a message; its command
// name is the user's, so only printable ASCII of it is kept.
std::string NameProcess(pid_t pid);

// Every process whose parent chain reaches `ancestor` (not itself).
std::vector<pid_t> DescendantsOf(pid_t ancestor);

// Resident bytes and CPU time (user and system, its reaped children's
// included) of every process whose process group is one of `groups`.
struct GroupUsage {
  int64_t rss_bytes = 0;
  double cpu_seconds = 0;
};
GroupUsage UsageOfGroups(const std::set<pid_t>& groups);

}  // namespace pilot::supervisor
