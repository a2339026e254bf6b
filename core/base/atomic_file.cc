#include "core/base/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>


namespace pilot {
namespace {

Status ErrnoStatus(const std::string& what, int err) {
  if (err == ENOENT) return Status::NotFound(what, std::strerror(err));
  if (err == EACCES || err == EPERM) return Status::Permission(what, std::strerror(err));
  return Status::IoError(what, std::strerror(err));
}

class PosixFileOps final : public FileOps {
 public:
  Result<int> CreateExclusive(const std::string& path, mode_t mode) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return ErrnoStatus(path, errno);
    if (::fchmod(fd, mode) != 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return ErrnoStatus(path, err);
    }
    return fd;
  }
  Status Write(int fd, std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(fd, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("write", errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }
  Status Sync(int fd) override {
    if (::fsync(fd) != 0) return ErrnoStatus("fsync", errno);
    return Status::Ok();
  }
  Status Close(int fd) override {
    if (::close(fd) != 0) return ErrnoStatus("close", errno);
    return Status::Ok();
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(to, errno);
    return Status::Ok();
  }
  Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus(dir + ": fsync", err);
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(path, errno);
    return Status::Ok();
  }
};

}  // namespace

FileOps& RealFileOps() {
  static PosixFileOps ops;
  return ops;
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status WriteFileAtomic(const std::string& path, std::string_view bytes, mode_t mode, FileOps& fs) {
  if (path.empty() || path.back() == '/') return Status::Invalid("write", "no file name");
  const std::string dir = DirName(path);
  // A random part, so that two writers of one name in one process never
  // share a temporary file (no crypto.h: it reads keys through this file).
  unsigned char rnd[6] = {};
  std::string suffix;
  if (::getrandom(rnd, sizeof rnd, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof rnd)) {
    static const char kHex[] = "0123456789abcdef";
    for (unsigned char b : rnd) {
      suffix += kHex[b >> 4];
      suffix += kHex[b & 15];
    }
  } else {
    suffix = "0";
  }
  const std::string tmp =
      dir + "/." + BaseName(path) + ".tmp." + std::to_string(::getpid()) + "." + suffix;

  PILOT_ASSIGN_OR_RETURN(int fd, fs.CreateExclusive(tmp, mode));
  // From here on every failure removes the temporary file before returning.
  Status s = fs.Write(fd, bytes);
  if (s.ok()) s = fs.Sync(fd);
  Status c = fs.Close(fd);
  if (s.ok()) s = c;
  if (s.ok()) s = fs.Rename(tmp, path);
  if (!s.ok()) {
    fs.Remove(tmp);  // best effort; the original error is the one to report
    return s.Context(path);
  }
  // The new file is in place; a failing directory fsync means it may not
  // survive a crash, which the caller must hear about.
  PILOT_RETURN_IF_ERROR(fs.SyncDir(dir));
  return Status::Ok();
}

Result<std::string> ReadFileLimited(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: a FIFO planted by a user must not block us in open().
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(path, "no such file");
    return ErrnoStatus(path, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IoError(path, "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Status::Invalid(path, "larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  std::vector<char> buf(64 * 1024);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Status::IoError(path, std::string("read: ") + std::strerror(err));
    }
    if (n == 0) break;
    // The file may grow while we read it: the limit holds for what we read.
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return Status::Invalid(path, "larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace pilot
