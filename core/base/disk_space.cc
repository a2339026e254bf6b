// Free space before a large write.
#include "core/base/disk_space.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

namespace pilot {

int64_t SafetensorsFileBound(int64_t data_bytes, int64_t tensors, int64_t name_bytes) {
  return 8 + tensors * kSafetensorsEntryBytes + name_bytes + kSafetensorsMetaBytes + data_bytes +
         kFileBlockBytes;
}

std::string FormatSize(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= 1000ll * 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f GB", b / 1e9);
  } else if (bytes >= 1000ll * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  } else if (bytes >= 1000) {
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  }
  return buf;
}

Status CheckSpace(const std::string& what, const std::vector<SpaceNeed>& needs,
                  const std::vector<MeasuredSpace>& measured) {
  if (needs.size() != measured.size()) return Status::Internal(what, "needs and measurements differ in number");
  // Filesystems in the order their first need appears.
  std::vector<uint64_t> order;
  std::map<uint64_t, std::vector<size_t>> by_device;
  for (size_t i = 0; i < needs.size(); ++i) {
    auto [it, fresh] = by_device.try_emplace(measured[i].device);
    if (fresh) order.push_back(measured[i].device);
    it->second.push_back(i);
  }
  for (uint64_t device : order) {
    const std::vector<size_t>& idx = by_device[device];
    int64_t total = 0;
    size_t largest = idx[0];
    for (size_t i : idx) {
      total += needs[i].bytes;
      if (needs[i].bytes > needs[largest].bytes) largest = i;
    }
    const int64_t free_bytes = measured[idx[0]].free_bytes;
    if (total <= free_bytes) continue;
    std::string where = needs[largest].dir + " (" + needs[largest].label;
    std::string labels = needs[largest].label;
    if (idx.size() > 1) {
      where += ":";
      for (size_t i : idx) {
        const std::string& name = needs[i].what.empty() ? needs[i].label : needs[i].what;
        where += " " + name + " " + FormatSize(needs[i].bytes) + (i == idx.back() ? "" : ",");
        // Each setting that moves a need once ("--out or --out" says nothing).
        if (i != largest && (" or " + labels + " or ").find(" or " + needs[i].label + " or ") == std::string::npos) {
          labels += " or " + needs[i].label;
        }
      }
      where += " on the same filesystem";
    }
    where += ")";
    return Status::IoError(what, "needs " + FormatSize(total) + ", " + FormatSize(free_bytes) + " free on " + where)
        .WithHint("free " + FormatSize(total - free_bytes) + " on that filesystem, or set " + labels +
                  " to a directory on one with room");
  }
  return Status::Ok();
}

Result<MeasuredSpace> MeasureSpace(const std::string& dir) {
  std::string path = dir.empty() ? "." : dir;
  struct stat st {};
  // The nearest existing parent of a directory a save will create.
  while (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || path == "." || path == "/") {
      return Status::IoError(path, std::string("stat: ") + std::strerror(errno));
    }
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) {
      path = ".";
    } else if (slash == 0) {
      path = "/";
    } else {
      path.resize(slash);
    }
  }
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) {
    return Status::IoError(path, std::string("statvfs: ") + std::strerror(errno));
  }
  MeasuredSpace m;
  m.device = static_cast<uint64_t>(st.st_dev);
  m.free_bytes = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  return m;
}

Status CheckFreeSpace(const std::string& what, const std::vector<SpaceNeed>& needs) {
  std::vector<MeasuredSpace> measured;
  for (const SpaceNeed& n : needs) {
    Result<MeasuredSpace> m = MeasureSpace(n.dir);
    if (!m.ok()) return m.status().Context(what);
    measured.push_back(*m);
  }
  return CheckSpace(what, needs, measured);
}

}  // namespace pilot
