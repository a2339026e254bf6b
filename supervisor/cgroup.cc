#include "supervisor/cgroup.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
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

std::string ContainerCgroupParent(const std::string& proc_self_cgroup) {
  std::string unified, memory;
  size_t start = 0;
  while (start < proc_self_cgroup.size()) {
    size_t end = proc_self_cgroup.find('\n', start);
    if (end == std::string::npos) end = proc_self_cgroup.size();
    const std::string line = proc_self_cgroup.substr(start, end - start);
    start = end + 1;
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const std::string path = line.substr(b + 1);
    if (line.compare(0, 3, "0::") == 0) unified = path;
    if (controllers.find(",memory,") != std::string::npos) memory = path;
  }
  std::string parent;
  if (!memory.empty()) {
    parent = memory;
  } else if (!unified.empty()) {
    const size_t slash = unified.rfind('/');
    parent = slash == std::string::npos ? "" : unified.substr(0, slash);
  }
  if (parent.empty() || parent == "/" || parent.front() != '/' || parent.find("/..") != std::string::npos ||
      parent.find_first_of("\n,") != std::string::npos) {
    return "";
  }
  return parent;
}

std::string ContainerCgroupParent() {
  std::ifstream in("/proc/self/cgroup");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ContainerCgroupParent(text);
}

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

namespace pilot::supervisor {

int64_t MemoryLimitBytes() {
  int64_t limit = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    while (in >> key >> kib) {
      if (key == "MemTotal:") {
        limit = kib * 1024;
        break;
      }
      in.ignore(1 << 10, '\n');
    }
  }
  std::string path = UnifiedPath("/proc/self/cgroup");
  if (path.find("..") != std::string::npos) return limit;
  for (;;) {
    std::ifstream in("/sys/fs/cgroup" + path + "/memory.max");
    std::string v;
    if (in >> v && v != "max") {
      const int64_t b = std::atoll(v.c_str());
      if (b > 0 && (limit == 0 || b < limit)) limit = b;
    }
    if (path.empty() || path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == std::string::npos || slash == 0 ? "" : path.substr(0, slash);
  }
  return limit;
}

}  // namespace pilot::supervisor
