// Atomic file replacement and bounded reads.
//
// WriteFileAtomic commits a file the way a database commits a manifest:
// the bytes go to a temporary file in the target's directory, which is
// flushed (fsync), renamed over the target and made durable by an fsync of
// the directory. A reader sees either the old file or the new one, never a
// partial one; on any failure the temporary file is removed and the old file
// (if any) is untouched. Nothing is committed from a destructor.
//
// All file-system access goes through the narrow FileOps interface so tests
// can inject a failure at any step (see FaultyFileOps in the tests).
//
// Thread-safety: the functions are thread-safe if the FileOps is; the real
// one is. Two writers of the same path race benignly (last rename wins).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace pilot {

// The file-system operations the atomic writer needs. Every error is a
// Status naming the path and the OS error.
class FileOps {
 public:
  virtual ~FileOps() = default;
  // open(path, O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC) and fchmod to `mode`
  // (exactly `mode`, independent of the umask). Returns the descriptor.
  virtual Result<int> CreateExclusive(const std::string& path, mode_t mode) = 0;
  // Writes all of `data` (loops over short writes).
  virtual Status Write(int fd, std::string_view data) = 0;
  virtual Status Sync(int fd) = 0;  // fsync
  virtual Status Close(int fd) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Opens `dir` read-only and fsyncs it (makes a rename durable).
  virtual Status SyncDir(const std::string& dir) = 0;
  // unlink; a missing file is not an error.
  virtual Status Remove(const std::string& path) = 0;
};

// The operating system's implementation (a process-wide singleton).
FileOps& RealFileOps();

// Atomically replaces `path` with `bytes`, file mode `mode` (e.g. 0644).
// The temporary file is "<dir>/.<name>.tmp.<pid>.<random>".
// Errors: kNotFound (directory missing), kIoError, kPermission.
Status WriteFileAtomic(const std::string& path, std::string_view bytes, mode_t mode = 0644,
                       FileOps& fs = RealFileOps());

// Reads a whole regular file that must not exceed `max_bytes` (for input
// other people control: a larger file is refused, not truncated).
// Errors: kNotFound, kIoError (includes "not a regular file"),
// kInvalid ("larger than N bytes").
Result<std::string> ReadFileLimited(const std::string& path, size_t max_bytes);

// "dir" of "dir/name" ("." when there is no slash; "/" for "/name").
std::string DirName(const std::string& path);
// "name" of "dir/name".
std::string BaseName(const std::string& path);

}  // namespace pilot
