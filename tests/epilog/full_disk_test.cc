// RunEpilog when the disk is full and after the verdict: the verdict stored
// from the reserve, queued for `pilot flush` when the store still fails,
// logged when nothing can be written, never an error (a failing epilog
// drains the node); the work folder removed once the verdict is safe, kept
// with keep_work or when the verdict is not.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/records/verdict.h"
#include "epilog/epilog.h"
#include "job/reserve.h"
#include "job/state_layout.h"
#include "job/verdict_history.h"
#include "tests/job/tiny_fs.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

class EpilogDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "RunEpilog makes root-owned folders";
    char tmpl[] = "/tmp/pilot-epilog-disk-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    policy_.state_dir = dir_ + "/state";
    policy_.work_root = dir_ + "/work";
    policy_.key_file = dir_ + "/none.key";
    policy_.signing_key_file = dir_ + "/none-ed.key";
    policy_.runner_path = "/nonexistent/pilot-runner";
    policy_.state_reserve_mb = 1;
    job_.job_id = 42;
    job_.uid = getuid();
    job_.gid = getgid();
    job_.is_pilot = true;
    deps_.now_unix = [] { return int64_t{1'800'000'000}; };
    deps_.run = [](const job::CommandSpec&) -> Result<job::CommandResult> {
      job::CommandResult r;
      r.exit_code = 1;
      return r;
    };
    deps_.decide = [](const epilog::EpilogInputs& in, const Policy&) -> Result<Verdict> {
      Verdict v;
      v.job.id = in.job.job_id;
      v.instance = "i1";
      v.issued = "2026-11-30T00:00:00Z";
      v.expires = "2099-01-01T00:00:00Z";
      Check c;
      c.name = "completed";
      c.status = CheckStatus::kFail;
      c.detail = "no results.json from the supervisor";
      v.checks.push_back(c);
      return v;
    };
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  job::StateLayout Layout() const { return job::StateLayout(policy_.state_dir, policy_.work_root); }
  // The job's work folder, as the prolog leaves it, with a checkpoint in it.
  std::string MakeWork() const {
    const std::string work = Layout().Job(42).work;
    fs::create_directories(work + "/pilot-checkpoints/single");
    std::ofstream(work + "/pilot-checkpoints/single/model.safetensors") << "weights";
    return work;
  }

  std::string dir_;
  Policy policy_;
  job::JobEnv job_;
  epilog::EpilogDeps deps_;
};

TEST_F(EpilogDiskTest, TheWorkFolderGoesAfterTheVerdictIsStored) {
  const std::string work = MakeWork();
  EXPECT_EQ(work, dir_ + "/work/42");
  auto r = epilog::RunEpilog(policy_, job_, deps_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(fs::exists(r->verdict_path));
  EXPECT_TRUE(r->work_removed) << r->note;
  EXPECT_FALSE(fs::exists(work));
  EXPECT_TRUE(fs::is_directory(policy_.work_root));
}

TEST_F(EpilogDiskTest, KeepWorkKeepsIt) {
  policy_.keep_work = true;
  const std::string work = MakeWork();
  auto r = epilog::RunEpilog(policy_, job_, deps_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->work_removed);
  EXPECT_TRUE(fs::exists(work + "/pilot-checkpoints/single/model.safetensors"));
}

TEST_F(EpilogDiskTest, WithoutALockTheRealDecisionIsNoGo) {
  // What a prolog that could not write the lock leaves: nothing at all.
  policy_.hardware_catalog = std::string(PILOT_SOURCE_DIR) + "/etc/hardware.toml";
  epilog::EpilogDeps real = epilog::RealEpilogDeps(policy_);
  deps_.decide = real.decide;
  auto r = epilog::RunEpilog(policy_, job_, deps_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->decision, Decision::kNoGo);
  Result<Verdict> v = ReadVerdict(r->verdict_path);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  bool lock_missing = false;
  for (const Check& c : v->checks) {
    if (c.status == CheckStatus::kFail && c.measured == "lock_missing") lock_missing = true;
  }
  EXPECT_TRUE(lock_missing) << VerdictToJson(*v);
}

class FullStateEpilogTest : public EpilogDiskTest {
 protected:
  void SetUp() override {
    EpilogDiskTest::SetUp();
    if (IsSkipped()) return;
    const std::string why = state_.Mount(4096);
    if (!why.empty()) GTEST_SKIP() << why;
    policy_.state_dir = state_.dir();
    policy_.work_root = "";  // the old layout: work/ fills the state disk
  }
  testutil::TinyFs state_;
};

TEST_F(FullStateEpilogTest, TheVerdictIsStoredFromTheReserve) {
  ASSERT_TRUE(job::EnsureReserve(Layout(), int64_t{policy_.state_reserve_mb} << 20).value());
  const std::string work = MakeWork();
  state_.Fill();
  auto r = epilog::RunEpilog(policy_, job_, deps_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->verdict_path.empty()) << r->note;
  EXPECT_TRUE(ReadVerdict(r->verdict_path).ok());
  EXPECT_NE(r->note.find("released its reserve"), std::string::npos) << r->note;
  EXPECT_TRUE(r->work_removed);
  EXPECT_FALSE(fs::exists(work));
}

// Proves: the case, one level up. Another user took every block of
// the state file system, the shared reserve too (there is none left): the
// verdict is still stored, written into the space the prolog set aside for
// it before the job ran, and the work folder goes after it.
TEST_F(FullStateEpilogTest, TheVerdictIsStoredFromItsOwnSpaceWhenEverythingElseIsTaken) {
  const std::string work = MakeWork();
  const std::string space = Layout().Job(42).verdict_space;
  ASSERT_TRUE(job::SetAsideVerdictSpace(space).ok());
  ASSERT_FALSE(fs::exists(Layout().ReserveFile()));
  state_.Fill();
  auto r = epilog::RunEpilog(policy_, job_, deps_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->verdict_path, Layout().VerdictFile(42)) << r->note;
  EXPECT_FALSE(r->lost);
  EXPECT_TRUE(ReadVerdict(r->verdict_path).ok());
  EXPECT_EQ(r->note.find("reserve"), std::string::npos) << r->note;
  EXPECT_FALSE(fs::exists(space));
  EXPECT_TRUE(r->work_removed);
}

TEST_F(FullStateEpilogTest, NothingWritableIsLoggedNotAFailure) {
  const std::string work = MakeWork();
  state_.Fill();
  auto r = epilog::RunEpilog(policy_, job_, deps_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->lost);
  EXPECT_EQ(r->verdict_path, "");
  EXPECT_NE(r->note.find("the verdict was NO-GO; completed: no results.json from the supervisor"),
            std::string::npos)
      << r->note;
  // The verdict is not safe: the work folder stays.
  EXPECT_TRUE(fs::exists(work + "/pilot-checkpoints/single/model.safetensors"));
}

TEST_F(EpilogDiskTest, AVerdictThatCannotBeStoredIsQueuedAndFlushedLater) {
  // Only the verdicts' folder is full (its own tiny file system).
  testutil::TinyFs verdicts;
  const std::string why = verdicts.Mount(64);
  if (!why.empty()) GTEST_SKIP() << why;
  fs::create_directories(Layout().VerdictsDir());
  ASSERT_EQ(
      ::mount(verdicts.dir().c_str(), Layout().VerdictsDir().c_str(), nullptr, MS_BIND, nullptr),
      0);
  verdicts.Fill();
  const std::string work = MakeWork();
  auto r = epilog::RunEpilog(policy_, job_, deps_);
  ::umount2(Layout().VerdictsDir().c_str(), MNT_DETACH);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->verdict_path, "");
  EXPECT_EQ(r->unstored_path, Layout().UnstoredFile(42)) << r->note;
  EXPECT_FALSE(r->lost);
  EXPECT_TRUE(r->work_removed);
  EXPECT_NE(r->note.find("for `pilot flush` to store"), std::string::npos) << r->note;

  // `pilot flush` later: the queued verdict goes into the store.
  Result<job::StoredQueued> flushed = job::StoreQueuedVerdicts(Layout());
  ASSERT_TRUE(flushed.ok());
  EXPECT_EQ(flushed->stored, 1);
  EXPECT_EQ(ReadVerdict(Layout().VerdictFile(42)).value().instance, "i1");
  EXPECT_FALSE(fs::exists(Layout().UnstoredFile(42)));
}

}  // namespace
}  // namespace pilot
