// results.json, pilot-supervisor's record of a pilot, holds the program's
// command line and the ends of its output: root's, readable by the job's
// user (the epilog's verify and `pilot report` read it as the user) and by
// no other user (job/job_user_file.h). A workload that cannot even start
// still leaves one, so a runner path that does not exist is enough here.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/base/atomic_file.h"
#include "core/records/lock.h"
#include "core/records/results.h"
#include "job/job_user_file.h"
#include "job/state_layout.h"
#include "supervisor/supervise.h"

namespace pilot::supervisor {
namespace {

namespace fs = std::filesystem;

TEST(SuperviseResults, ReadableByRootAndTheJobsUserOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the workload runs as another user";
  char tmpl[] = "/tmp/pilot-supervise-results-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const job::StateLayout layout(dir);
  const job::JobPaths paths = layout.Job(7);
  fs::create_directories(paths.work);
  Lock lock;
  lock.instance = "0123456789abcdef0123456789abcdef";
  lock.job.id = 7;
  lock.job.user = "nobody";
  lock.job.uid = 65534;
  lock.job.gid = 65534;
  lock.config.copy = paths.config;  // absent: the builtin, which cannot start
  lock.seeds.training = 1234;
  lock.seeds.source = "config";
  lock.container.method = "none";
  lock.created = "2026-12-01T00:00:00Z";
  ASSERT_TRUE(WriteFileAtomic(paths.lock, LockToJson(lock)).ok());
  SuperviseOptions o;
  o.job_id = 7;
  o.run_as = job::RunAs{65534, 65534, "nobody"};
  o.home = "/";
  o.runner = dir + "/no-such-pilot-runner";
  o.stage = "single";
  o.job_env = {"PATH=/usr/bin:/bin"};
  o.policy.state_dir = dir;
  testing::internal::CaptureStderr();
  Supervise(o);
  const std::string log = testing::internal::GetCapturedStderr();

  struct stat sb {};
  ASSERT_EQ(stat(paths.results.c_str(), &sb), 0) << log;
  EXPECT_TRUE(ReadResultsFile(paths.results).ok());
  EXPECT_EQ(sb.st_uid, 0u);
  EXPECT_EQ(sb.st_mode & 0007, 0u) << "nothing for other users";
  char acl[64];
  const ssize_t n = getxattr(paths.results.c_str(), "system.posix_acl_access", acl, sizeof acl);
  if (n < 0) {
    EXPECT_EQ(sb.st_gid, 65534u) << "no ACLs here: the job's group";
    EXPECT_EQ(sb.st_mode & 07777, 0640u);
  } else {
    EXPECT_EQ(std::string(acl, static_cast<size_t>(n)), job::PosixAclUserRead(65534));
    EXPECT_EQ(sb.st_gid, 0u);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pilot::supervisor
