#include "supervisor/program/proc_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace pilot::supervisor {

GroupUsage UsageOfGroups(const std::set<pid_t>& groups) {
  GroupUsage u;
  DIR* d = opendir("/proc");
  if (d == nullptr) return u;
  const long page = sysconf(_SC_PAGESIZE);
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string path = std::string("/proc/") + e->d_name + "/stat";
    char buf[1024];
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* rp = std::strrchr(buf, ')');
    if (rp == nullptr) continue;
    // Fields after the command (proc(5)): 3 state, 4 ppid, 5 pgrp, ...,
    // 14 utime, 15 stime, 16 cutime, 17 cstime, ..., 24 rss.
    long long f[25] = {};
    const char* p = rp + 1;
    for (int field = 3; field <= 24 && *p != '\0'; ++field) {
      while (*p == ' ') ++p;
      if (field > 3) f[field] = std::atoll(p);
      while (*p != '\0' && *p != ' ') ++p;
    }
    if (groups.count(static_cast<pid_t>(f[5])) == 0) continue;
    u.rss_bytes += f[24] * page;
    u.cpu_seconds += static_cast<double>(f[14] + f[15] + f[16] + f[17]) / tick;
  }
  closedir(d);
  return u;
}

bool ReadStat(pid_t pid, long* ppid, std::string* comm) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  char buf[1024];
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* lp = std::strchr(buf, '(');
  const char* rp = std::strrchr(buf, ')');
  if (lp == nullptr || rp == nullptr || rp < lp) return false;
  if (comm != nullptr) comm->assign(lp + 1, rp);
  char state = 0;
  return std::sscanf(rp + 1, " %c %ld", &state, ppid) == 2;
}

uid_t UidOf(pid_t pid) {
  struct stat st{};
  if (stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0) return static_cast<uid_t>(-1);
  return st.st_uid;
}

std::string NameProcess(pid_t pid) {
  std::string comm;
  long ppid = 0;
  ReadStat(pid, &ppid, &comm);
  std::string shown;
  for (char c : comm) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return "pid " + std::to_string(pid) + (shown.empty() ? "" : " (" + shown + ")") + ", uid " +
         std::to_string(static_cast<long>(UidOf(pid)));
}

std::vector<pid_t> DescendantsOf(pid_t ancestor) {
  std::map<pid_t, pid_t> parent;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
      long ppid = 0;
      if (ReadStat(pid, &ppid, nullptr)) parent[pid] = static_cast<pid_t>(ppid);
    }
    closedir(d);
  }
  std::vector<pid_t> out;
  for (const auto& [pid, pp] : parent) {
    pid_t cur = pp;
    for (int hops = 0; hops < 4096 && cur > 1; ++hops) {
      if (cur == ancestor) {
        out.push_back(pid);
        break;
      }
      auto it = parent.find(cur);
      if (it == parent.end()) break;
      cur = it->second;
    }
  }
  return out;
}

}  // namespace pilot::supervisor
