// RunProlog against a fake world: the work folder where the layout puts it
// (under a work root on another file system too), the quota command, and a
// full state file system: the lock from the reserve, or no lock and still
// no failure (a failing prolog drains the node).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/records/lock.h"
#include "core/records/verdict.h"
#include "job/job_user_file.h"
#include "job/pins.h"
#include "job/reserve.h"
#include "job/state_layout.h"
#include "prolog/prolog.h"
#include "tests/job/tiny_fs.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

bool HasProblem(const Lock& lock, const std::string& code) {
  for (const LockProblem& p : lock.problems) {
    if (p.code == code) return true;
  }
  return false;
}

class RunPrologTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "RunProlog makes root-owned folders";
    char tmpl[] = "/tmp/pilot-run-prolog-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.state_dir = dir_ + "/state";
    opts_.runner = "/nonexistent/pilot-runner";
    opts_.reserve_bytes = 256 << 10;
    opts_.floor_bytes = 0;  // FullStateTest sets one
    job_.job_id = 42;
    job_.uid = 4321;
    job_.gid = 4321;
    job_.user = "alice";
    job_.is_pilot = true;
    deps_.now_unix = [] { return int64_t{1'800'000'000}; };
    // Every helper "fails": the lock records it, which is what a test
    // without a runner, a config or a registry expects.
    deps_.run = [this](const job::CommandSpec& spec) -> Result<job::CommandResult> {
      ran_.push_back(spec.argv);
      job::CommandResult r;
      r.exit_code = spec.argv[0] == opts_.work_quota_command ? quota_exit_ : 1;
      r.err = "quota: no such project";
      return r;
    };
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  job::StateLayout Layout() const { return job::StateLayout(opts_.state_dir, opts_.work_root); }

  std::string dir_;
  prolog::PrologOptions opts_;
  job::JobEnv job_;
  prolog::PrologDeps deps_;
  std::vector<std::vector<std::string>> ran_;
  int quota_exit_ = 0;
};

TEST_F(RunPrologTest, TheWorkFolderIsTheUsersWhereTheLayoutSaysByDefault) {
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const job::JobPaths p = Layout().Job(42);
  EXPECT_EQ(p.work, opts_.state_dir + "/jobs/42/work");
  struct stat sb {};
  ASSERT_EQ(lstat(p.work.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, 4321u);
  EXPECT_EQ(sb.st_mode & 07777, 0700u);
  Result<Lock> lock = ReadLock(p.lock);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_TRUE(HasProblem(*lock, "config_missing"));
  EXPECT_FALSE(HasProblem(*lock, "work_quota_failed"));
  EXPECT_TRUE(fs::exists(Layout().ReserveFile()));
}

// Proves: the lock records the job's GPUs as slurmd gave them to the
// prolog (SLURM_JOB_GPUS): what the supervisor samples, whatever the job's
// own environment says.
TEST_F(RunPrologTest, TheLockRecordsTheJobsGpusFromSlurmd) {
  job_.gpus = "1,2";
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  Result<Lock> lock = ReadLock(Layout().Job(42).lock);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_EQ(lock->job.gpus, std::optional<std::string>("1,2"));
}

// Proves: after Slurm's job ids restart, the prolog of a new job 42 moves
// the verdict an earlier job 42 left into the history, so `pilot verdict
// 42` shows no earlier series' verdict for the new job.
TEST_F(RunPrologTest, AnEarlierJobsVerdictMovesToTheHistory) {
  const job::StateLayout layout = Layout();
  fs::create_directories(layout.VerdictsDir());
  Verdict earlier;
  earlier.job = {42, "bob", "old-run", std::string(64, 'a')};
  earlier.instance = "0123456789abcdef0123456789abcdef";
  earlier.issued = "2026-01-01T00:00:00Z";
  earlier.expires = "2026-01-15T00:00:00Z";
  std::ofstream(layout.VerdictFile(42)) << VerdictToJson(earlier);
  testing::internal::CaptureStderr();
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(fs::exists(layout.VerdictFile(42)));
  EXPECT_TRUE(fs::exists(layout.VerdictHistoryFile(42, earlier.instance)));
  EXPECT_NE(log.find("an earlier start's verdict moved to"), std::string::npos) << log;
}

TEST_F(RunPrologTest, AnotherNodeOfTheJobRecordsItselfAndLeavesTheJobsFolderAlone) {
  job_.nodes = 2;
  job_.node_list = "pn[1-2]";
  job_.host = "pn2";
  // The first node's prolog ran first: its folder must survive this one.
  job_.host = "pn1";
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const job::JobPaths p = Layout().Job(42);
  Result<Lock> first = ReadLock(p.lock);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  job_.host = "pn2";
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  Result<Lock> after = ReadLock(p.lock);
  ASSERT_TRUE(after.ok()) << "the first node's lock is still there: " << after.status().ToString();
  EXPECT_EQ(after->instance, first->instance);
  EXPECT_TRUE(fs::is_empty(Layout().AtticDir())) << "nothing moved aside";
  const std::string record = Layout().NodeRecordFile(42, "pn2");
  EXPECT_EQ(record, opts_.state_dir + "/nodes/42/pn2.json");
  Result<Lock> mine = ReadLock(record);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->job.host, "pn2");
  EXPECT_EQ(mine->job.nodes, 2);
  EXPECT_EQ(mine->instance, "") << "the instance is drawn by the first node only";
  struct stat sb {};
  ASSERT_EQ(stat(record.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, 0u);
  EXPECT_EQ(sb.st_mode & 07777, 0644u);
  // Alone (the other order, or a state directory of its own): no job
  // folder is made on the other node.
  fs::remove_all(opts_.state_dir);
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  EXPECT_FALSE(fs::exists(p.dir));
  EXPECT_TRUE(fs::exists(record));
}

TEST_F(RunPrologTest, AWorkRootOnAnotherFileSystemHoldsTheWorkFolder) {
  testutil::TinyFs work;
  const std::string why = work.Mount(256);
  if (!why.empty()) GTEST_SKIP() << why;
  opts_.work_root = work.dir() + "/pilot";
  testing::internal::CaptureStderr();
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const std::string log = testing::internal::GetCapturedStderr();
  const job::JobPaths p = Layout().Job(42);
  EXPECT_EQ(p.work, work.dir() + "/pilot/42");
  struct stat sb {};
  ASSERT_EQ(lstat(p.work.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, 4321u);
  EXPECT_FALSE(fs::exists(p.dir + "/work"));
  EXPECT_TRUE(ReadLock(p.lock).ok());
  EXPECT_EQ(log.find("same file system"), std::string::npos) << log;

  // A kept work folder of an earlier start of the id goes to the attic.
  const std::string earlier = ReadLock(p.lock).value().instance;
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  EXPECT_TRUE(fs::is_directory(Layout().WorkAtticFor(42, earlier)));
  EXPECT_TRUE(fs::is_directory(p.work));
}

TEST_F(RunPrologTest, AWorkRootBesideTheStateDirIsWarnedAbout) {
  opts_.work_root = dir_ + "/work";
  testing::internal::CaptureStderr();
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("pilot-prolog: job 42: warning: work_root " + dir_ +
                     "/work is on the same "
                     "file system as state_dir"),
            std::string::npos)
      << log;
  EXPECT_TRUE(fs::is_directory(dir_ + "/work/42"));
}

TEST_F(RunPrologTest, TheQuotaCommandRunsAsRootAndItsFailureIsALockProblem) {
  opts_.work_quota_command = "/usr/local/sbin/pilot-work-quota";
  quota_exit_ = 3;
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const job::JobPaths p = Layout().Job(42);
  bool ran = false;
  for (const auto& argv : ran_) {
    if (argv[0] != opts_.work_quota_command) continue;
    ran = true;
    EXPECT_EQ(argv, (std::vector<std::string>{opts_.work_quota_command, p.work, "4321", "42"}));
  }
  EXPECT_TRUE(ran);
  Result<Lock> lock = ReadLock(p.lock);
  ASSERT_TRUE(lock.ok());
  ASSERT_TRUE(HasProblem(*lock, "work_quota_failed"));
  for (const LockProblem& pr : lock->problems) {
    if (pr.code == "work_quota_failed") {
      EXPECT_NE(pr.detail.find("quota: no such project"), std::string::npos) << pr.detail;
    }
  }
  quota_exit_ = 0;
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  EXPECT_FALSE(HasProblem(ReadLock(p.lock).value(), "work_quota_failed"));
}

// A program's pins: the prolog runs itself as the user (pilot-prolog
// --pins) and keeps what it prints, beside what the plugin recorded at
// submit, and the run identity over both config and pins.
TEST_F(RunPrologTest, PinsAProgramAsTheUserAndKeepsWhatWasSubmitted) {
  const std::string text = "[run]\nname = \"t\"\nseq_len = 128\nmicro_batch = 2\n"
                           "target_steps = 100\n[program]\ncommand = [\"python3\", \"t.py\"]\n"
                           "workdir = \"/home/alice/w\"\nhub_models = [\"org/m\"]\n";
  job_.config_path = "/home/alice/p.toml";
  job_.hub_cache = "/home/alice/hf";
  LockPin pin;
  pin.kind = "file";
  pin.name = "t.py";
  pin.sha256 = std::string(64, 'a');
  job_.pins_submitted = "{\"t.py\": \"sha256 " + std::string(64, 'b') + "\"}";
  std::string request;
  deps_.run = [&](const job::CommandSpec& spec) -> Result<job::CommandResult> {
    job::CommandResult r;
    r.exit_code = 1;
    if (spec.argv[0] == "/bin/cat" && spec.argv.back() == job_.config_path) {
      r.exit_code = 0;
      r.out = text;
    } else if (spec.argv.size() == 3 && spec.argv[1] == "--pins") {
      EXPECT_TRUE(spec.run_as && spec.run_as->uid == 4321u) << "pinned as the user";
      request = spec.argv[2];
      r.exit_code = 0;
      r.out = LockPinsToJson({pin});
    }
    return r;
  };
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  Result<Lock> lock = ReadLock(Layout().Job(42).lock);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_FALSE(HasProblem(*lock, "config_invalid")) << LockToJson(*lock);
  Result<job::PinRequest> req = job::ParsePinRequest(request);
  ASSERT_TRUE(req.ok()) << request;
  EXPECT_EQ(req->workdir, "/home/alice/w");
  EXPECT_EQ(req->hub_cache, "/home/alice/hf");
  EXPECT_EQ(req->hub_models, std::vector<std::string>{"org/m"});
  ASSERT_EQ(lock->pins.size(), 1u);
  EXPECT_EQ(lock->pins[0].sha256, std::string(64, 'a'));
  ASSERT_TRUE(lock->pins_submitted.has_value());
  EXPECT_EQ(lock->pins_submitted->at("t.py"), "sha256 " + std::string(64, 'b'));
  EXPECT_EQ(MovedPins(*lock->pins_submitted, PinSummary(lock->pins)).size(), 1u);
  ASSERT_TRUE(lock->identity.has_value());
  EXPECT_EQ(lock->identity->sha256, RunIdentity(*lock).sha256);
  EXPECT_FALSE(HasProblem(*lock, "pins_unreadable"));
}

// The config copy may carry the user's secrets (program.env): root's,
// readable by the job's user through an ACL (the runner reads it as the
// user), by no other user (job/job_user_file.h), and still the bytes the
// user submitted.
TEST_F(RunPrologTest, TheConfigCopyIsReadableByTheJobsUserOnly) {
  const std::string text =
      "[run]\nname = \"t\"\n[program]\ncommand = [\"python3\", \"t.py\"]\n"
      "env = { WANDB_API_KEY = \"s3cret\" }\n";
  job_.config_path = "/home/alice/p.toml";
  deps_.run = [&](const job::CommandSpec& spec) -> Result<job::CommandResult> {
    job::CommandResult r;
    r.exit_code = 1;
    if (spec.argv[0] == "/bin/cat" && spec.argv.back() == job_.config_path) {
      EXPECT_TRUE(spec.run_as && spec.run_as->uid == 4321u) << "read as the user";
      r.exit_code = 0;
      r.out = text;
    }
    return r;
  };
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const std::string copy = Layout().Job(42).config;
  Result<Lock> lock = ReadLock(Layout().Job(42).lock);
  ASSERT_TRUE(lock.ok());
  EXPECT_FALSE(HasProblem(*lock, "config_unreadable"));
  EXPECT_FALSE(HasProblem(*lock, "config_copy_failed"));
  Result<std::string> got = ReadFileLimited(copy, 1 << 20);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, text);
  struct stat sb {};
  ASSERT_EQ(stat(copy.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, 0u);
  EXPECT_EQ(sb.st_mode & 0007, 0u) << "nothing for other users";
  EXPECT_EQ(sb.st_mode & 0200, 0200u);
  char acl[64];
  const ssize_t n = getxattr(copy.c_str(), "system.posix_acl_access", acl, sizeof acl);
  if (n < 0) {
    // The state directory's file system has no ACLs: the job's group reads it.
    EXPECT_EQ(sb.st_gid, 4321u);
    EXPECT_EQ(sb.st_mode & 07777, 0640u);
  } else {
    EXPECT_EQ(std::string(acl, static_cast<size_t>(n)), job::PosixAclUserRead(4321));
    EXPECT_EQ(sb.st_gid, 0u);
  }
}

class FullStateTest : public RunPrologTest {
 protected:
  void SetUp() override {
    RunPrologTest::SetUp();
    if (IsSkipped()) return;
    const std::string why = state_.Mount(1024);
    if (!why.empty()) GTEST_SKIP() << why;
    opts_.state_dir = state_.dir();
  }
  testutil::TinyFs state_;
};

TEST_F(FullStateTest, TheLockIsWrittenFromTheReserve) {
  // A first job makes the folders and the reserve; then the disk fills up.
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  state_.Fill();
  job_.job_id = 43;
  testing::internal::CaptureStderr();
  Status s = prolog::RunProlog(opts_, job_, deps_);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.ToString();
  Result<Lock> lock = ReadLock(Layout().Job(43).lock);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString() << "\n" << log;
  EXPECT_EQ(lock->job.id, 43);
  EXPECT_FALSE(fs::exists(Layout().ReserveFile()));
  EXPECT_NE(log.find("pilot-prolog: job 43: the state directory's file system is full: "
                     "released its reserve"),
            std::string::npos)
      << log;
}

// Proves: before the job runs, the prolog sets aside the blocks its verdict
// will be written into (job/reserve.h), in the job's root-only folder.
TEST_F(RunPrologTest, TheVerdictsSpaceIsSetAsideBeforeTheJobRuns) {
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  const std::string space = Layout().Job(42).verdict_space;
  struct stat sb {};
  ASSERT_EQ(lstat(space.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, 0u);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_GE(static_cast<int64_t>(sb.st_blocks) * 512, job::kVerdictSpaceBytes);
}

// Proves: below the policy's floor the pilot is refused with a clear
// reason in the lock (state_space_low, the free and the required MiB), the
// prolog does not fail (no drain), and the verdict's space is still set
// aside, so the NO-GO can be stored.
TEST_F(FullStateTest, BelowTheFloorThePilotIsRefusedWithAReason) {
  opts_.floor_bytes = int64_t{64} << 20;
  testing::internal::CaptureStderr();
  Status s = prolog::RunProlog(opts_, job_, deps_);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.ToString();
  Result<Lock> lock = ReadLock(Layout().Job(42).lock);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  ASSERT_TRUE(HasProblem(*lock, job::kProblemStateSpaceLow)) << log;
  for (const LockProblem& p : lock->problems) {
    if (p.code != job::kProblemStateSpaceLow) continue;
    EXPECT_NE(p.detail.find("MiB free, below the site's floor of 64 MiB (state_floor_mb)"),
              std::string::npos)
        << p.detail;
  }
  EXPECT_TRUE(fs::exists(Layout().Job(42).verdict_space));
  EXPECT_NE(log.find("pilot-prolog: job 42: refusing the pilot: "), std::string::npos) << log;
  // Room enough: admitted again.
  opts_.floor_bytes = 64 << 10;
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  EXPECT_FALSE(HasProblem(ReadLock(Layout().Job(42).lock).value(), job::kProblemStateSpaceLow));
}

TEST_F(FullStateTest, NoRoomEvenAfterTheReserveIsNoFailureAndNoLock) {
  ASSERT_TRUE(prolog::RunProlog(opts_, job_, deps_).ok());
  fs::remove(Layout().ReserveFile());
  state_.Fill();
  job_.job_id = 43;
  testing::internal::CaptureStderr();
  Status s = prolog::RunProlog(opts_, job_, deps_);
  const std::string log = testing::internal::GetCapturedStderr();
  // Exit 0 (the node is not drained); the task refuses without a lock and
  // the epilog's verdict is NO-GO (lock_missing).
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(fs::exists(Layout().Job(43).lock));
  EXPECT_NE(log.find("pilot-prolog: job 43: cannot write the lock: "), std::string::npos) << log;
  EXPECT_NE(log.find("the verdict is NO-GO"), std::string::npos) << log;
}

}  // namespace
}  // namespace pilot
