// Files of a job's folder readable by root and the job's user only
// (job/job_user_file.h): the ACL's bytes, who can read and write what
// WriteJobUserFile leaves (checked by opening it as other uids in a child
// process), the fallback to the job's group where a file system refuses
// ACLs, and a full disk that is not taken for such a file system.
#include "job/job_user_file.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"

namespace pilot::job {
namespace {

constexpr uid_t kUser = 65534;   // the job's user (nobody)
constexpr uid_t kOther = 65533;  // another user of the cluster

// What open(path, flags) gives a process of `uid` and `gid` (no
// supplementary groups): 0 or the errno.
int OpenAs(uid_t uid, gid_t gid, const std::string& path, int flags) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(100);
    const int fd = open(path.c_str(), flags | O_CLOEXEC);
    _exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::string AclOf(const std::string& path) {
  std::vector<char> buf(256);
  const ssize_t n = getxattr(path.c_str(), "system.posix_acl_access", buf.data(), buf.size());
  return n < 0 ? std::string() : std::string(buf.data(), static_cast<size_t>(n));
}

class JobUserFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the files are root's, read as other uids";
    char tmpl[] = "/tmp/pilot-job-user-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // as the job's folder: others may pass
    path_ = dir_ + "/config.toml";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  StateLayout Layout() const { return StateLayout(dir_); }
  LogLine Log() {
    return [this](const std::string& line) { log_ += line + "\n"; };
  }
  struct stat Stat() const {
    struct stat sb {};
    EXPECT_EQ(stat(path_.c_str(), &sb), 0);
    return sb;
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      names.push_back(e.path().filename().string());
    }
    return names;
  }

  std::string dir_, path_, log_;
};

// The kernel's format: 4-byte version 2, then {tag, perm, id} entries,
// little-endian, sorted by tag. A byte out of place and the kernel refuses
// the attribute (EINVAL), which the file-system tests below would show as
// a fallback.
TEST(PosixAclUserRead, TheKernelsLayout) {
  const std::string v = PosixAclUserRead(0x01020304);
  const std::string expected(
      "\x02\x00\x00\x00"                   // version 2
      "\x01\x00\x06\x00\xff\xff\xff\xff"   // USER_OBJ rw-
      "\x02\x00\x04\x00\x04\x03\x02\x01"   // USER 0x01020304 r--
      "\x04\x00\x00\x00\xff\xff\xff\xff"   // GROUP_OBJ ---
      "\x10\x00\x04\x00\xff\xff\xff\xff"   // MASK r--
      "\x20\x00\x00\x00\xff\xff\xff\xff",  // OTHER ---
      44);
  EXPECT_EQ(v, expected);
}

// The secret-bearing file: root's, the job's user reads it and cannot
// write or re-mode it, another user cannot read it.
TEST_F(JobUserFileTest, RootsReadableByTheJobsUserOnly) {
  ASSERT_TRUE(WriteJobUserFile(Layout(), path_, "WANDB_API_KEY = \"s3cret\"\n", kUser, kUser,
                               Log())
                  .ok());
  const std::string acl = AclOf(path_);
  if (acl.empty() && errno == EOPNOTSUPP) GTEST_SKIP() << dir_ << ": no POSIX ACLs here";
  EXPECT_EQ(acl, PosixAclUserRead(kUser));
  const struct stat sb = Stat();
  EXPECT_EQ(sb.st_uid, 0u);
  EXPECT_EQ(sb.st_gid, 0u);
  EXPECT_EQ(sb.st_mode & 07777, 0640u) << "group bits are the ACL's mask r--";
  EXPECT_EQ(OpenAs(kUser, kUser, path_, O_RDONLY), 0);
  EXPECT_EQ(OpenAs(kUser, kUser, path_, O_WRONLY), EACCES);
  EXPECT_EQ(OpenAs(kOther, kOther, path_, O_RDONLY), EACCES);
  // Root's group has no entry of its own: the mask is not a grant.
  EXPECT_EQ(OpenAs(kOther, 0, path_, O_RDONLY), EACCES);
  EXPECT_EQ(log_, "");
  // No temporary file left beside it.
  EXPECT_EQ(Files(), std::vector<std::string>{"config.toml"});
}

// A file system without POSIX ACLs: root:GID 0640, said in the log.
TEST_F(JobUserFileTest, WithoutAclsTheJobsGroupReadsIt) {
  int calls = 0;
  const SetXattr refuse = [&](int, const char*, std::string_view) {
    ++calls;
    return EOPNOTSUPP;
  };
  ASSERT_TRUE(WriteJobUserFile(Layout(), path_, "x = 1\n", kUser, kUser, Log(), refuse).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(AclOf(path_), "");
  const struct stat sb = Stat();
  EXPECT_EQ(sb.st_uid, 0u);
  EXPECT_EQ(sb.st_gid, kUser);
  EXPECT_EQ(sb.st_mode & 07777, 0640u);
  EXPECT_EQ(OpenAs(kUser, kUser, path_, O_RDONLY), 0);
  EXPECT_EQ(OpenAs(kUser, kUser, path_, O_WRONLY), EACCES);
  EXPECT_EQ(OpenAs(kOther, kOther, path_, O_RDONLY), EACCES);
  EXPECT_NE(log_.find("refuses POSIX ACLs: the file is group 65534's (mode 0640)"),
            std::string::npos)
      << log_;
}

// No room for the attribute is a full disk, not a file system without
// ACLs: an error the reserve answers (IsOutOfSpace), no group fallback,
// nothing left behind.
TEST_F(JobUserFileTest, AFullDiskIsNoReasonToFallBack) {
  const SetXattr full = [](int, const char*, std::string_view) { return ENOSPC; };
  const Status s = WriteJobUserFile(Layout(), path_, "x = 1\n", kUser, kUser, Log(), full);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(IsOutOfSpace(s)) << s.ToString();
  EXPECT_TRUE(Files().empty());
}

// The job's user owns the file already (a job of root's, the supervisor
// run without root in tests): 0600, no ACL.
TEST_F(JobUserFileTest, AnOwnerNeedsNoAcl) {
  ASSERT_TRUE(WriteJobUserFile(Layout(), path_, "x = 1\n", 0, 0, Log()).ok());
  EXPECT_EQ(AclOf(path_), "");
  EXPECT_EQ(Stat().st_mode & 07777, 0600u);
  EXPECT_EQ(OpenAs(kUser, kUser, path_, O_RDONLY), EACCES);
}

// A new write replaces the file with the same rights (results.json is
// written once per pilot, a config copy once per start).
TEST_F(JobUserFileTest, ReplacingKeepsTheRights) {
  ASSERT_TRUE(WriteFileAtomic(path_, "old", 0644).ok());
  ASSERT_TRUE(WriteJobUserFile(Layout(), path_, "new", kUser, kUser, Log()).ok());
  EXPECT_EQ(OpenAs(kOther, kOther, path_, O_RDONLY), EACCES);
  EXPECT_EQ(OpenAs(kUser, kUser, path_, O_RDONLY), 0);
  Result<std::string> text = ReadFileLimited(path_, 100);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "new");
}

}  // namespace
}  // namespace pilot::job
