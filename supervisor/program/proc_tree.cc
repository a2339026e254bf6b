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

int64_t GroupRss(const std::set<pid_t>& groups) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  int64_t total = 0;
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
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (std::sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    if (groups.count(static_cast<pid_t>(pgrp)) == 0) continue;
    // Fields after ')': state(3) ... rss is field 24 of the whole line.
    const char* p = rp + 1;
    int field = 2;
    long long rss = 0;
    while (*p != '\0' && field < 24) {
      while (*p == ' ') ++p;
      ++field;
      if (field == 24) {
        rss = std::atoll(p);
        break;
      }
      while (*p != '\0' && *p != ' ') ++p;
    }
    total += rss * page;
  }
  closedir(d);
  return total;
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
