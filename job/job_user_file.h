// Files of a job's folder that only root and the job's user may read.
//
// The prolog's copy of the config holds what the user wrote (program.env
// may carry an API key) and the supervisor's results.json what the program
// did and printed (its command line, the ends of its output). Other users
// must not read them, and the job's user must not change them (the epilog
// decides from them), yet the job's user reads both: pilot-runner, run as
// the user, reads the config copy in the pilot and results.json in the
// epilog's verify, and `pilot report JOBID` reads them for the user. So
// such a file is
//
//   root:root, mode 0600, plus the POSIX ACL entry user:UID:r-- (ls -l
//   shows -rw-r-----+: with an ACL the group bits are its mask, and the
//   owning group, root, has no entry of its own to read with);
//
// the ACL is written as the extended attribute system.posix_acl_access
// (no libacl: the kernel's format, PosixAclUserRead below). Where the file
// system refuses it (a file system without POSIX ACLs, an NFS export without
// them) the file is root:GID, mode 0640, GID the job's group: the other
// members of that group can then read it too, and WriteJobUserFile logs
// that it fell back. A job's user that owns the file anyway (root's job, or
// a test run without root) gets plain 0600.
//
// Verdicts are public and stay 0644 (job/verdict_history.h).
//
// Thread-safety: no shared state.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "job/reserve.h"
#include "job/state_layout.h"

namespace pilot::job {

// The value of system.posix_acl_access that gives the owner rw-, `uid`
// r--, the owning group and others nothing (mask r--): a version-2 header
// (4 bytes, little-endian 2) and five 8-byte entries {u16 tag, u16 perm,
// u32 id}, little-endian, in the order the kernel requires: USER_OBJ,
// USER uid, GROUP_OBJ, MASK, OTHER (id 0xFFFFFFFF where it names no one).
std::string PosixAclUserRead(uid_t uid);

// How a file was shared with the job's user.
enum class JobUserAccess {
  kOwner,  // the user owns it: 0600 is enough
  kAcl,    // root 0600 + user:UID:r--
  kGroup,  // root:GID 0640 (no ACLs on this file system)
};

// Sets the attribute `name` of the open file `fd` to `value`; 0 or an
// errno. The real one is fsetxattr(2); tests inject EOPNOTSUPP.
using SetXattr = std::function<int(int fd, const char* name, std::string_view value)>;

// Makes the open regular file `fd` readable by root and `uid` only, as
// above. REQUIRES: the caller owns `fd`'s file. Errors: kIoError naming
// `path` (fstat, fchown or fchmod refused; an ACL refused for want of space,
// ENOSPC/EDQUOT, which is not a reason to fall back).
Result<JobUserAccess> ShareWithJobUser(int fd, const std::string& path, uid_t uid, gid_t gid,
                                       const SetXattr& set_xattr = {});

// WriteWithReserve (job/reserve.h) of a file shared with the job's user
// `uid` (group `gid`): written whole under a temporary name, shared, synced,
// renamed into place, so no reader ever sees it with other rights. Logs one
// line when it fell back to the group.
Status WriteJobUserFile(const StateLayout& layout, const std::string& path,
                        std::string_view bytes, uid_t uid, gid_t gid, const LogLine& log,
                        const SetXattr& set_xattr = {});

}  // namespace pilot::job
