#include "job/safe_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/base/unique_fd.h"

namespace pilot::job {
namespace {

constexpr char kNotFollowed[] =
    "is a symbolic link (not followed: the job's folder belongs to its user)";

// What a non-regular file is, for the message.
std::string KindOfSafeRead(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "another kind of file";
}

// Why opening `name` in the folder `dirfd` failed with `err`; `path` names it.
Status OpenError(int dirfd, const std::string& name, const std::string& path, int err) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return Status::Permission(path, kNotFollowed);
  }
  if (err == ENOENT) return Status::NotFound(path, "no such file");
  if (err == ENOTDIR) return Status::IoError(path, "not a directory");
  if (err == EACCES || err == EPERM) return Status::Permission(path, std::strerror(err));
  return Status::IoError(path, std::strerror(err));
}

Status TooLarge(const std::string& path, size_t max_bytes) {
  return Status::Invalid(path, "larger than " + std::to_string(max_bytes) + " bytes");
}

Status NotRegular(const std::string& path, mode_t mode) {
  return Status::IoError(path, "not a regular file (" + KindOfSafeRead(mode) + ")");
}

// The folder that holds DIR/RELATIVE's last component, reached without
// following a link; *last is that component, *path the whole path.
Result<UniqueFd> OpenParentBeneath(const std::string& dir, const std::string& relative,
                                   std::string* last, std::string* path) {
  const std::string whole = dir + "/" + relative;
  if (relative.empty() || relative.front() == '/') {
    return Status::Invalid(whole, "not a path relative to " + dir);
  }
  std::vector<std::string> names;
  for (size_t at = 0;;) {
    const size_t slash = relative.find('/', at);
    names.push_back(relative.substr(at, slash == std::string::npos ? slash : slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  for (const std::string& n : names) {
    if (n.empty() || n == "." || n == "..") {
      return Status::Invalid(whole, "every component must be a name (no \"\", \".\" or \"..\")");
    }
  }
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return OpenError(AT_FDCWD, dir, dir, errno);
  UniqueFd current(fd);
  *path = dir;
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    *path += "/" + names[i];
    fd = ::openat(current.get(), names[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return OpenError(current.get(), names[i], *path, errno);
    current.reset(fd);
  }
  *path += "/" + names.back();
  *last = names.back();
  return Result<UniqueFd>(std::move(current));
}

}  // namespace

Result<UniqueFd> OpenBeneath(const std::string& dir, const std::string& relative,
                             struct stat* st) {
  if (relative == ".") {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return OpenError(AT_FDCWD, dir, dir, errno);
    UniqueFd d(fd);
    if (::fstat(d.get(), st) != 0) return Status::IoError(dir, std::strerror(errno));
    return Result<UniqueFd>(std::move(d));
  }
  std::string last, path;
  Result<UniqueFd> parent = OpenParentBeneath(dir, relative, &last, &path);
  if (!parent.ok()) return parent.status();
  if (::fstatat(parent->get(), last.c_str(), st, AT_SYMLINK_NOFOLLOW) != 0) {
    return OpenError(parent->get(), last, path, errno);
  }
  if (S_ISLNK(st->st_mode)) return Status::Permission(path, kNotFollowed);
  const bool folder = S_ISDIR(st->st_mode);
  if (!folder && !S_ISREG(st->st_mode)) return NotRegular(path, st->st_mode);
  const int fd = ::openat(parent->get(), last.c_str(),
                          O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
                              (folder ? O_DIRECTORY : O_NONBLOCK));
  if (fd < 0) return OpenError(parent->get(), last, path, errno);
  UniqueFd opened(fd);
  if (::fstat(opened.get(), st) != 0) {
    return Status::IoError(path, std::string("fstat: ") + std::strerror(errno));
  }
  if (S_ISDIR(st->st_mode) != folder || (!folder && !S_ISREG(st->st_mode))) {
    return NotRegular(path, st->st_mode);
  }
  return Result<UniqueFd>(std::move(opened));
}

Result<struct stat> StatBeneath(const std::string& dir, const std::string& relative) {
  std::string last, path;
  Result<UniqueFd> parent = OpenParentBeneath(dir, relative, &last, &path);
  if (!parent.ok()) return parent.status();
  struct stat st {};
  if (::fstatat(parent->get(), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return OpenError(parent->get(), last, path, errno);
  }
  return st;
}

Result<std::string> ReadFileBeneath(const std::string& dir, const std::string& relative,
                                    size_t max_bytes) {
  std::string last, path;
  Result<UniqueFd> parent = OpenParentBeneath(dir, relative, &last, &path);
  if (!parent.ok()) return parent.status();
  UniqueFd current = std::move(parent).value();
  // Looked at before opening (a device is not opened at all) and again on
  // the descriptor (what was opened is what is read, whatever changed since).
  struct stat st {};
  if (::fstatat(current.get(), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return OpenError(current.get(), last, path, errno);
  }
  if (S_ISLNK(st.st_mode)) return Status::Permission(path, kNotFollowed);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  const int fd = ::openat(current.get(), last.c_str(),
                O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return OpenError(current.get(), last, path, errno);
  const UniqueFd file(fd);
  if (::fstat(file.get(), &st) != 0) {
    return Status::IoError(path, std::string("fstat: ") + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return TooLarge(path, max_bytes);

  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  std::vector<char> buf(64 * 1024);
  for (;;) {
    const ssize_t n = ::read(file.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(path, std::string("read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    // The file may grow while it is read: the limit holds for what is read.
    if (out.size() + static_cast<size_t>(n) > max_bytes) return TooLarge(path, max_bytes);
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

std::optional<std::string> PathBelow(const std::string& dir, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path d = fs::absolute(dir, ec).lexically_normal();
  if (ec) return std::nullopt;
  fs::path p = fs::absolute(path, ec).lexically_normal();
  if (ec) return std::nullopt;
  if (!d.has_filename()) d = d.parent_path();  // "/state/jobs/" -> "/state/jobs"
  const fs::path rel = p.lexically_relative(d);
  if (rel.empty() || rel == "." || *rel.begin() == "..") return std::nullopt;
  return rel.string();
}

}  // namespace pilot::job
