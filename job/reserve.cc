#include "job/reserve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/base/atomic_file.h"

namespace pilot::job {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::string MiB(int64_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

// Fills fd to `bytes`: fallocate, else zeros where the file system has no
// fallocate (EOPNOTSUPP).
Status Preallocate(int fd, int64_t bytes, const std::string& path) {
  const int rc = ::posix_fallocate(fd, 0, bytes);
  if (rc == 0) return Status::Ok();
  if (rc != EOPNOTSUPP && rc != EINVAL) {
    return Status::IoError(path, std::string("fallocate: ") + std::strerror(rc));
  }
  static const std::string kZeros(64 << 10, '\0');
  for (int64_t done = 0; done < bytes;) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(bytes - done, kZeros.size()));
    const ssize_t w = ::write(fd, kZeros.data(), n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::IoError(path, std::string("write: ") + std::strerror(errno));
    done += w;
  }
  return Status::Ok();
}

}  // namespace

bool IsOutOfSpace(const Status& s) {
  if (s.ok()) return false;
  const std::string m = s.Message();
  return m.find(std::strerror(ENOSPC)) != std::string::npos ||
         m.find(std::strerror(EDQUOT)) != std::string::npos;
}

Result<bool> EnsureReserve(const StateLayout& layout, int64_t bytes) {
  const std::string path = layout.ReserveFile();
  struct stat sb {};
  const bool present = ::lstat(path.c_str(), &sb) == 0;
  if (bytes <= 0) {
    if (present && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::IoError(path, std::string("unlink: ") + std::strerror(errno));
    }
    return false;
  }
  if (present && S_ISREG(sb.st_mode) && sb.st_size >= bytes &&
      static_cast<int64_t>(sb.st_blocks) * 512 >= bytes) {
    return true;
  }
  struct statvfs vfs {};
  if (::statvfs(layout.root().c_str(), &vfs) != 0) {
    return Status::IoError(layout.root(), std::string("statvfs: ") + std::strerror(errno));
  }
  const int64_t have =
      present && S_ISREG(sb.st_mode) ? static_cast<int64_t>(sb.st_blocks) * 512 : 0;
  const int64_t free_bytes =
      static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  if (free_bytes + have < 2 * bytes) return false;
  const std::string tmp = layout.root() + "/.reserve.tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError(tmp, std::string("open: ") + std::strerror(errno));
  Status s = Preallocate(fd, bytes, tmp);
  if (s.ok() && ::fsync(fd) != 0)
    s = Status::IoError(tmp, std::string("fsync: ") + std::strerror(errno));
  if (::close(fd) != 0 && s.ok())
    s = Status::IoError(tmp, std::string("close: ") + std::strerror(errno));
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Status::IoError(path, std::string("rename: ") + std::strerror(errno));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    // No room after all (the free figure moved): not an error, next time.
    if (IsOutOfSpace(s)) return false;
    return s;
  }
  return true;
}

Status SetAsideVerdictSpace(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError(path, std::string("open: ") + std::strerror(errno));
  Status s = Preallocate(fd, kVerdictSpaceBytes, path);
  if (s.ok() && ::fsync(fd) != 0) {
    s = Status::IoError(path, std::string("fsync: ") + std::strerror(errno));
  }
  if (::close(fd) != 0 && s.ok()) {
    s = Status::IoError(path, std::string("close: ") + std::strerror(errno));
  }
  if (!s.ok()) ::unlink(path.c_str());
  return s;
}

Result<std::optional<int64_t>> FreeBelowFloor(const StateLayout& layout, int64_t floor_bytes) {
  if (floor_bytes <= 0) return std::optional<int64_t>();
  struct statvfs vfs {};
  if (::statvfs(layout.root().c_str(), &vfs) != 0) {
    return Status::IoError(layout.root(), std::string("statvfs: ") + std::strerror(errno));
  }
  const int64_t free_bytes =
      static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  if (free_bytes >= floor_bytes) return std::optional<int64_t>();
  return std::optional<int64_t>(free_bytes);
}

Status WriteWithReserve(const StateLayout& layout, const std::string& path, std::string_view bytes,
                        mode_t mode, const LogLine& log, FileOps& fs) {
  Status first = WriteFileAtomic(path, bytes, mode, fs);
  if (first.ok() || !IsOutOfSpace(first)) return first;
  const std::string reserve = layout.ReserveFile();
  struct stat sb {};
  if (::lstat(reserve.c_str(), &sb) != 0) {
    if (log) log(path + ": no space left, and the state directory's reserve is used up already");
    return first;
  }
  if (::unlink(reserve.c_str()) != 0 && errno != ENOENT) {
    if (log) log(reserve + ": cannot release the reserve: " + std::strerror(errno));
    return first;
  }
  if (log) {
    log("the state directory's file system is full: released its reserve (" +
        MiB(static_cast<int64_t>(sb.st_size)) + ") to write " + path);
  }
  return WriteFileAtomic(path, bytes, mode, fs);
}

}  // namespace pilot::job
