#include "job/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/base/atomic_file.h"

namespace pilot::job {
namespace {

constexpr int kMaxDepth = 256;
constexpr int kOpenDir = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

struct WalkRemoveTree {
  dev_t dev = 0;
  RemovedTree out;
  void Leave(const std::string& why) {
    if (out.left.empty()) out.left = why;
  }
};

// Empties the folder open as `fd` (shown as `shown` in messages); closes fd.
void Empty(int fd, const std::string& shown, int depth, WalkRemoveTree* w) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    w->Leave(shown + ": " + std::strerror(errno));
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  for (const std::string& n : names) {
    const std::string here = shown + "/" + n;
    struct stat sb {};
    if (::fstatat(fd, n.c_str(), &sb, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) w->Leave(here + ": " + std::strerror(errno));
      continue;
    }
    if (S_ISDIR(sb.st_mode)) {
      if (sb.st_dev != w->dev) {
        w->Leave(here + ": another file system is mounted there: left alone");
        continue;
      }
      if (depth >= kMaxDepth) {
        w->Leave(here + ": deeper than " + std::to_string(kMaxDepth) + " folders: left");
        continue;
      }
      const int sub = ::openat(fd, n.c_str(), kOpenDir);
      if (sub < 0) {
        w->Leave(here + ": " + std::strerror(errno));
        continue;
      }
      struct stat opened {};
      if (::fstat(sub, &opened) != 0 || opened.st_dev != w->dev || opened.st_ino != sb.st_ino) {
        w->Leave(here + ": changed while being removed: left");
        ::close(sub);
        continue;
      }
      Empty(sub, here, depth + 1, w);
      if (::unlinkat(fd, n.c_str(), AT_REMOVEDIR) != 0) {
        w->Leave(here + ": " + std::strerror(errno));
        continue;
      }
    } else if (::unlinkat(fd, n.c_str(), 0) != 0) {
      if (errno != ENOENT) w->Leave(here + ": " + std::strerror(errno));
      continue;
    }
    ++w->out.entries;
  }
  ::closedir(d);  // closes fd
}

}  // namespace

Result<RemovedTree> RemoveTreeBeneath(const std::string& parent, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return Status::Invalid(name, "not one name of a folder");
  }
  const std::string shown = parent + "/" + name;
  WalkRemoveTree w;
  const int pfd = ::open(parent.c_str(), kOpenDir);
  if (pfd < 0 && errno == ENOENT) return w.out;
  if (pfd < 0) return Status::IoError(parent, std::strerror(errno));
  const int fd = ::openat(pfd, name.c_str(), kOpenDir);
  if (fd < 0) {
    const int err = errno;
    ::close(pfd);
    if (err == ENOENT) return w.out;
    return Status::IoError(
        shown, std::string("not removed (not a folder, or a link): ") + std::strerror(err));
  }
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    ::close(pfd);
    return Status::IoError(shown, std::strerror(err));
  }
  w.dev = sb.st_dev;
  // Something mounted on the folder itself (a FUSE mount its user made):
  // not this file system's to remove.
  struct stat parent_sb {};
  if (::fstat(pfd, &parent_sb) != 0 || parent_sb.st_dev != sb.st_dev) {
    ::close(fd);
    ::close(pfd);
    w.Leave(shown + ": another file system is mounted there: left alone");
    return w.out;
  }
  Empty(fd, shown, 1, &w);
  if (w.out.left.empty()) {
    if (::unlinkat(pfd, name.c_str(), AT_REMOVEDIR) == 0) {
      ++w.out.entries;
    } else {
      w.Leave(shown + ": " + std::strerror(errno));
    }
  }
  ::close(pfd);
  return w.out;
}

Result<RemovedTree> RemoveTree(const std::string& path) {
  return RemoveTreeBeneath(DirName(path), BaseName(path));
}

}  // namespace pilot::job
