#include "job/job_user_file.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/base/atomic_file.h"

namespace pilot::job {
namespace {

// <linux/posix_acl.h> and <linux/posix_acl_xattr.h>, spelled here: the
// uapi headers do not export them all on every system.
constexpr char kAclAccess[] = "system.posix_acl_access";
constexpr uint32_t kAclVersion = 2;
constexpr uint16_t kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kMask = 0x10, kOther = 0x20;
constexpr uint16_t kRead = 4, kWrite = 2;
constexpr uint32_t kNoId = 0xFFFFFFFFu;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void Entry(std::string* out, uint16_t tag, uint16_t perm, uint32_t id) {
  PutLe(out, tag, 2);
  PutLe(out, perm, 2);
  PutLe(out, id, 4);
}

int RealSetXattr(int fd, const char* name, std::string_view value) {
  return ::fsetxattr(fd, name, value.data(), value.size(), 0) == 0 ? 0 : errno;
}

Status Errno(const std::string& path, const char* call, int err) {
  return Status::IoError(path, std::string(call) + ": " + std::strerror(err));
}

// WriteFileAtomic's file operations, with each new file shared with the
// job's user before a byte is written into it.
class JobUserFileOps final : public FileOps {
 public:
  JobUserFileOps(uid_t uid, gid_t gid, const SetXattr& set_xattr)
      : uid_(uid), gid_(gid), set_xattr_(set_xattr), base_(RealFileOps()) {}

  Result<int> CreateExclusive(const std::string& path, mode_t /*mode*/) override {
    PILOT_ASSIGN_OR_RETURN(int fd, base_.CreateExclusive(path, 0600));
    Result<JobUserAccess> access = ShareWithJobUser(fd, path, uid_, gid_, set_xattr_);
    if (!access.ok()) {
      (void)base_.Close(fd);
      (void)base_.Remove(path);
      return access.status();
    }
    access_ = *access;
    return fd;
  }
  Status Write(int fd, std::string_view data) override { return base_.Write(fd, data); }
  Status Sync(int fd) override { return base_.Sync(fd); }
  Status Close(int fd) override { return base_.Close(fd); }
  Status Rename(const std::string& from, const std::string& to) override {
    return base_.Rename(from, to);
  }
  Status SyncDir(const std::string& dir) override { return base_.SyncDir(dir); }
  Status Remove(const std::string& path) override { return base_.Remove(path); }

  JobUserAccess access() const { return access_; }

 private:
  uid_t uid_;
  gid_t gid_;
  const SetXattr& set_xattr_;
  FileOps& base_;
  JobUserAccess access_ = JobUserAccess::kOwner;
};

}  // namespace

std::string PosixAclUserRead(uid_t uid) {
  std::string v;
  PutLe(&v, kAclVersion, 4);
  Entry(&v, kUserObj, kRead | kWrite, kNoId);
  Entry(&v, kUser, kRead, static_cast<uint32_t>(uid));
  Entry(&v, kGroupObj, 0, kNoId);
  Entry(&v, kMask, kRead, kNoId);
  Entry(&v, kOther, 0, kNoId);
  return v;
}

Result<JobUserAccess> ShareWithJobUser(int fd, const std::string& path, uid_t uid, gid_t gid,
                                       const SetXattr& set_xattr) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Errno(path, "fstat", errno);
  if (st.st_uid == uid) {
    if (::fchmod(fd, 0600) != 0) return Errno(path, "fchmod", errno);
    return JobUserAccess::kOwner;
  }
  const std::string acl = PosixAclUserRead(uid);
  const int err = set_xattr ? set_xattr(fd, kAclAccess, acl) : RealSetXattr(fd, kAclAccess, acl);
  if (err == 0) return JobUserAccess::kAcl;
  // No room for the attribute is a full disk, which the caller's reserve
  // answers (job/reserve.h); anything else means no ACLs here.
  if (err == ENOSPC || err == EDQUOT) return Errno(path, "setxattr", err);
  if (::fchown(fd, st.st_uid, gid) != 0) return Errno(path, "fchown", errno);
  if (::fchmod(fd, 0640) != 0) return Errno(path, "fchmod", errno);
  return JobUserAccess::kGroup;
}

Status WriteJobUserFile(const StateLayout& layout, const std::string& path,
                        std::string_view bytes, uid_t uid, gid_t gid, const LogLine& log,
                        const SetXattr& set_xattr) {
  JobUserFileOps ops(uid, gid, set_xattr);
  PILOT_RETURN_IF_ERROR(WriteWithReserve(layout, path, bytes, 0600, log, ops));
  if (ops.access() == JobUserAccess::kGroup && log) {
    log(path + ": the file system refuses POSIX ACLs: the file is group " + std::to_string(gid) +
        "'s (mode 0640), so every member of the job's group can read it");
  }
  return Status::Ok();
}

}  // namespace pilot::job
