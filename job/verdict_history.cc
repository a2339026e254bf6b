#include "job/verdict_history.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "core/base/atomic_file.h"
#include "job/state_dir.h"

namespace pilot::job {
namespace {

// History names tried for one replaced verdict before giving up.
constexpr int kMaxClashes = 1000;
// A queued verdict larger than this is not one the epilog wrote.
constexpr size_t kMaxQueuedVerdictBytes = 4 << 20;

// Makes the history folder when missing; a link or a file there is refused.
Status EnsureHistoryDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::IoError(dir, std::string("mkdir: ") + std::strerror(errno));
  }
  struct stat sb {};
  if (::lstat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    return Status::IoError(dir, "not a directory");
  }
  return Status::Ok();
}

// Moves `from` to the first free history name of (job_id, instance): a
// hard link never replaces a file (EEXIST), then the old name goes.
Result<std::string> MoveToHistory(const StateLayout& layout, int64_t job_id,
                                  const std::string& instance, const std::string& from) {
  PILOT_RETURN_IF_ERROR(EnsureHistoryDir(layout.VerdictHistoryDir()));
  for (int clash = 0; clash < kMaxClashes; ++clash) {
    const std::string to = layout.VerdictHistoryFile(job_id, instance, clash);
    if (::link(from.c_str(), to.c_str()) != 0) {
      if (errno == EEXIST) continue;
      return Status::IoError(to, std::string("link from ") + from + ": " + std::strerror(errno));
    }
    PILOT_RETURN_IF_ERROR(RealFileOps().SyncDir(layout.VerdictHistoryDir()));
    if (::unlink(from.c_str()) != 0) {
      return Status::IoError(from, std::string("unlink: ") + std::strerror(errno));
    }
    return to;
  }
  return Status::IoError(layout.VerdictHistoryDir(),
                         "no free name for job " + std::to_string(job_id) + " instance " +
                             instance + " after " + std::to_string(kMaxClashes) + " tries")
      .WithHint("move old files out of " + layout.VerdictHistoryDir());
}

// Writes `body` into the preallocated file `space`, which must be a plain
// file of this process's owner with one link: from offset 0, cut to the
// body's size, made 0644, synced. Errors: kNotFound (no space set aside),
// kIoError.
Status FillVerdictSpace(const std::string& space, std::string_view body) {
  const int fd = ::open(space.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(space, "no space was set aside");
    return Status::IoError(space, std::string("open: ") + std::strerror(errno));
  }
  struct stat sb {};
  Status s = Status::Ok();
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != ::geteuid() ||
      sb.st_nlink != 1) {
    s = Status::IoError(space, "not a plain file of its own");
  }
  for (size_t done = 0; s.ok() && done < body.size();) {
    const ssize_t n = ::pwrite(fd, body.data() + done, body.size() - done,
                               static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) s = Status::IoError(space, std::string("write: ") + std::strerror(errno));
    else done += static_cast<size_t>(n);
  }
  if (s.ok() && ::ftruncate(fd, static_cast<off_t>(body.size())) != 0) {
    s = Status::IoError(space, std::string("truncate: ") + std::strerror(errno));
  }
  if (s.ok() && ::fchmod(fd, 0644) != 0) {
    s = Status::IoError(space, std::string("chmod: ") + std::strerror(errno));
  }
  if (s.ok() && ::fsync(fd) != 0) {
    s = Status::IoError(space, std::string("fsync: ") + std::strerror(errno));
  }
  ::close(fd);
  return s;
}

// Stores `body` at `path` from `space` when it can (FillVerdictSpace, then a
// rename and the folder synced): true; false when there was no space, or it
// could not be used (`why` says so). The space is gone afterwards either way.
bool StoreFromSpace(const std::string& space, const std::string& path, const std::string& dir,
                    std::string_view body, std::string* why) {
  if (space.empty()) return false;
  Status s = FillVerdictSpace(space, body);
  if (s.ok() && ::rename(space.c_str(), path.c_str()) != 0) {
    s = Status::IoError(path, std::string("rename from ") + space + ": " + std::strerror(errno));
  }
  if (s.ok()) {
    // Stored; a failed sync of the folder only weakens durability.
    (void)RealFileOps().SyncDir(dir);
    return true;
  }
  ::unlink(space.c_str());
  if (s.code() != Code::kNotFound) *why = s.Message();
  return false;
}

}  // namespace

std::string VerdictInstance(const Verdict& v) {
  if (!v.instance.empty()) return v.instance;
  std::string digits;
  for (char c : v.issued) {
    if (c >= '0' && c <= '9') digits += c;
  }
  return digits;
}

Result<StoredVerdictFile> StoreVerdict(const StateLayout& layout, int64_t job_id,
                                       const std::string& instance, std::string_view body,
                                       const LogLine& log, const std::string& space) {
  StoredVerdictFile out;
  out.path = layout.VerdictFile(job_id);
  // Every return below but the one that stores from it leaves no space:
  // its blocks are free for what the caller writes next.
  auto drop_space = [&space] {
    if (!space.empty()) ::unlink(space.c_str());
  };
  struct stat sb {};
  if (::lstat(out.path.c_str(), &sb) == 0) {
    Result<Verdict> stored = ReadVerdict(out.path);
    const std::string stored_instance = stored.ok() ? VerdictInstance(*stored) : "unreadable";
    if (stored.ok() && stored_instance == instance) {
      drop_space();
      out.kept = true;
      out.note = "a verdict of job " + std::to_string(job_id) + " instance " + instance +
                 " is stored already (the epilog ran twice): kept it";
      return out;
    }
    Result<std::string> moved = MoveToHistory(layout, job_id, stored_instance, out.path);
    if (!moved.ok()) {
      drop_space();
      return moved.status();
    }
    out.moved_to = *moved;
    out.note = "the verdict of instance " + stored_instance + " moved to " + out.moved_to;
  } else if (errno != ENOENT) {
    drop_space();
    return Status::IoError(out.path, std::strerror(errno));
  }
  std::string why;
  if (StoreFromSpace(space, out.path, layout.VerdictsDir(), body, &why)) {
    out.space_used = true;
    return out;
  }
  if (!why.empty() && log) {
    log("cannot write the verdict into its space (" + why + "): writing it anew");
  }
  PILOT_RETURN_IF_ERROR(WriteWithReserve(layout, out.path, body, 0644, log));
  return out;
}

RetiredVerdicts RetireEarlierVerdicts(const StateLayout& layout, int64_t job_id,
                                      const std::string& instance) {
  RetiredVerdicts out;
  for (const std::string& path : {layout.VerdictFile(job_id), layout.UnstoredFile(job_id)}) {
    struct stat sb {};
    if (::lstat(path.c_str(), &sb) != 0) {
      if (errno != ENOENT && out.error.ok()) out.error = Status::IoError(path, std::strerror(errno));
      continue;
    }
    Result<Verdict> v = ReadVerdict(path);
    const std::string of = v.ok() ? VerdictInstance(*v) : "unreadable";
    if (v.ok() && of == instance) continue;  // this start's own (a prolog run twice)
    Result<std::string> to = MoveToHistory(layout, job_id, of, path);
    if (!to.ok()) {
      if (out.error.ok()) out.error = to.status();
      continue;
    }
    ::chmod(to->c_str(), 0644);
    out.moved_to.push_back(*to);
  }
  return out;
}

Result<std::string> QueueUnstoredVerdict(const StateLayout& layout, int64_t job_id,
                                         std::string_view body, const LogLine& log) {
  PILOT_RETURN_IF_ERROR(MakeRootDir(layout.OutboxDir(), 0700));
  PILOT_RETURN_IF_ERROR(MakeRootDir(layout.UnstoredDir(), 0700));
  const std::string path = layout.UnstoredFile(job_id);
  PILOT_RETURN_IF_ERROR(WriteWithReserve(layout, path, body, 0600, log));
  return path;
}

Result<StoredQueued> StoreQueuedVerdicts(const StateLayout& layout) {
  StoredQueued out;
  const std::string dir = layout.UnstoredDir();
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return Status::IoError(dir, std::strerror(errno));
  }
  std::vector<std::pair<int64_t, std::string>> queued;
  while (struct dirent* e = ::readdir(d)) {
    if (std::optional<int64_t> job = StateLayout::JobOfVerdictFile(e->d_name)) {
      queued.emplace_back(*job, dir + "/" + e->d_name);
    }
  }
  ::closedir(d);
  std::sort(queued.begin(), queued.end());
  for (const auto& [job_id, path] : queued) {
    Result<Verdict> v = ReadVerdict(path);
    Result<std::string> body = ReadFileLimited(path, kMaxQueuedVerdictBytes);
    Status s = !v.ok() ? v.status() : !body.ok() ? body.status() : Status::Ok();
    if (s.ok() && v->job.id != job_id) {
      s = Status::Corrupt(path, "holds the verdict of job " + std::to_string(v->job.id));
    }
    if (s.ok()) s = StoreVerdict(layout, job_id, VerdictInstance(*v), *body).status();
    if (s.ok() && ::unlink(path.c_str()) != 0) {
      s = Status::IoError(path,
                          std::string("stored, but cannot be removed: ") + std::strerror(errno));
    }
    if (s.ok()) {
      ++out.stored;
    } else {
      ++out.kept;
      out.errors.push_back(s);
    }
  }
  return out;
}

}  // namespace pilot::job
