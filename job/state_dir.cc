#include "job/state_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pilot::job {

Status MakeRootDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Status::IoError(path, std::string("mkdir: ") + std::strerror(errno));
  }
  struct stat sb {};
  if (lstat(path.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    return Status::IoError(path, "not a directory");
  }
  if (chown(path.c_str(), 0, 0) != 0 || chmod(path.c_str(), mode) != 0) {
    return Status::Permission(path, std::string("chown/chmod: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status EnsureStateDir(const StateLayout& layout) {
  PILOT_RETURN_IF_ERROR(MakeRootDir(layout.root(), 0755));
  PILOT_RETURN_IF_ERROR(MakeRootDir(layout.JobsDir(), 0755));
  PILOT_RETURN_IF_ERROR(MakeRootDir(layout.VerdictsDir(), 0755));
  PILOT_RETURN_IF_ERROR(MakeRootDir(layout.OutboxDir(), 0700));
  PILOT_RETURN_IF_ERROR(MakeRootDir(layout.AtticDir(), 0700));
  if (!layout.work_root().empty()) PILOT_RETURN_IF_ERROR(MakeRootDir(layout.work_root(), 0755));
  return Status::Ok();
}

}  // namespace pilot::job
