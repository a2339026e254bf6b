// A long job bound to its pilot (job/binding.h): the prolog pins the
// pilot's config again for the long job and compares the identity with the
// grant's; the plugin's side reads the record it writes. A fake world as in
// run_prolog_test.cc: the config and the pins come from stand-in helpers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/decide/grant.h"
#include "core/records/lock.h"
#include "core/records/verdict.h"
#include "job/binding.h"
#include "job/pins.h"
#include "job/state_dir.h"
#include "job/state_layout.h"
#include "prolog/prolog.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

class BindRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the prolog makes root-owned folders";
    char tmpl[] = "/tmp/pilot-bind-run-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.state_dir = dir_ + "/state";
    opts_.runner = "/nonexistent/pilot-runner";
    opts_.reserve_bytes = 0;
    deps_.now_unix = [] { return int64_t{1'800'000'000}; };
    deps_.run = [this](const job::CommandSpec& spec) -> Result<job::CommandResult> {
      job::CommandResult r;
      r.exit_code = 1;
      if (spec.argv[0] == "/bin/cat" && spec.argv.back() == "/home/alice/p.toml") {
        r.exit_code = 0;
        r.out = config_;
      } else if (spec.argv.size() == 3 && spec.argv[1] == "--pins") {
        EXPECT_TRUE(spec.run_as && spec.run_as->uid == pinned_as_) << "pinned as the job's user";
        Result<job::PinRequest> req = job::ParsePinRequest(spec.argv[2]);
        EXPECT_TRUE(req.ok() && req->workdir == "/home/alice/w") << spec.argv[2];
        LockPin pin;
        pin.kind = "file";
        pin.name = "t.py";
        pin.sha256 = std::string(64, pin_hex_);
        r.exit_code = 0;
        r.out = LockPinsToJson({pin});
      }
      return r;
    };
    // The pilot, job 42 of alice (uid 4321), submitted from /home/alice/w.
    job::JobEnv pilot = Job(42, 4321, "alice");
    pilot.is_pilot = true;
    pilot.config_path = "/home/alice/p.toml";
    pilot.work_dir = "/home/alice/w";
    ASSERT_TRUE(prolog::RunProlog(opts_, pilot, deps_).ok());
    Result<Lock> lock = ReadLock(Layout().Job(42).lock);
    ASSERT_TRUE(lock.ok() && lock->identity) << lock.status().ToString();
    identity_ = *lock->identity;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  job::StateLayout Layout() const { return job::StateLayout(opts_.state_dir); }
  static job::JobEnv Job(int64_t id, uid_t uid, const std::string& user) {
    job::JobEnv j;
    j.job_id = id;
    j.uid = uid;
    j.gid = uid;
    j.user = user;
    j.host = "n1";
    return j;
  }
  // `pilot grant` for job `id` with `identity` (none: a verdict without).
  void Grant(int64_t id, const std::optional<LockIdentity>& identity) {
    Verdict v;
    v.job.id = id;
    v.job.user = "alice";
    v.budget.term = "30-day";
    v.identity = identity;
    GrantRequest r;
    r.job_id = id;
    r.nodes = 1;
    ASSERT_TRUE(job::MakeRootDir(Layout().GrantsDir(), 0755).ok());
    ASSERT_TRUE(
        WriteFileAtomic(Layout().GrantFile(id), GrantRecordJson(v, r, "root", 1'800'000'000), 0644)
            .ok());
  }
  // The long job `id` of `user` naming pilot `pilot`; its run record.
  job::RunRecord Bind(int64_t id, int64_t pilot, uid_t uid = 4321,
                      const std::string& user = "alice") {
    job::JobEnv j = Job(id, uid, user);
    j.pilot_run = pilot;
    pinned_as_ = uid;
    EXPECT_TRUE(prolog::RunProlog(opts_, j, deps_).ok());
    EXPECT_FALSE(fs::exists(Layout().Job(id).dir)) << "a bound run is no pilot: no job folder";
    Result<std::string> text = ReadFileLimited(Layout().RunFile(id), 1 << 20);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    Result<job::RunRecord> r =
        text.ok() ? job::ParseRunRecord(*text, "run") : Result<job::RunRecord>(text.status());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : job::RunRecord{};
  }

  std::string dir_;
  prolog::PrologOptions opts_;
  prolog::PrologDeps deps_;
  std::string config_ =
      "[run]\nname = \"t\"\nseq_len = 128\nmicro_batch = 2\ntarget_steps = 100\n"
      "[program]\ncommand = [\"python3\", \"t.py\"]\nworkdir = \"/home/alice/w\"\npin = "
      "[\"t.py\"]\n";
  char pin_hex_ = 'a';
  uid_t pinned_as_ = 4321;
  LockIdentity identity_;
};

TEST_F(BindRunTest, TheUnchangedRunIsAdmittedAndItsTasksRun) {
  Grant(42, identity_);
  job::RunRecord r = Bind(50, 42);
  EXPECT_EQ(r.decision, job::kRunAdmitted) << (r.reasons.empty() ? "" : r.reasons[0]);
  EXPECT_EQ(r.identity_sha256, identity_.sha256) << "the same parts pin to the same identity";
  EXPECT_EQ(r.piloted_sha256, identity_.sha256);
  EXPECT_EQ(job::RunRefusal(Layout().RunFile(50), 50, 4321, true), "");
}

TEST_F(BindRunTest, AnEditedPinnedFileIsNamedAndRefusesTheTasks) {
  Grant(42, identity_);
  pin_hex_ = 'c';
  job::RunRecord r = Bind(51, 42);
  ASSERT_EQ(r.decision, job::kRunRefused);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0], "pin t.py: sha256:cccccccccccc..., piloted sha256:aaaaaaaaaaaa...");
  const std::string msg = job::RunRefusal(Layout().RunFile(51), 51, 4321, true);
  EXPECT_NE(msg.find("refused: not the run piloted by job 42: pin t.py"), std::string::npos) << msg;
  // An edited config is its own part.
  pin_hex_ = 'a';
  config_ += "# a comment changes the bytes\n";
  r = Bind(52, 42);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0].rfind("config: sha256:", 0), 0u) << r.reasons[0];
  std::vector<job::RunRecord> runs = job::RunsOfPilot(Layout().RunsDir(), 42);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].job_id, 51);
  EXPECT_EQ(runs[1].job_id, 52);
  EXPECT_TRUE(job::RunsOfPilot(Layout().RunsDir(), 7).empty());
}

TEST_F(BindRunTest, NoGrantAnotherUsersGrantOrOneWithoutIdentityRefuse) {
  job::RunRecord none = Bind(60, 42);
  ASSERT_EQ(none.decision, job::kRunRefused);
  EXPECT_NE(none.reasons[0].find("job 42 has no grant"), std::string::npos) << none.reasons[0];
  Grant(42, identity_);
  job::RunRecord bob = Bind(61, 42, 999, "bob");
  ASSERT_EQ(bob.decision, job::kRunRefused);
  EXPECT_EQ(bob.reasons[0], "job 42 was granted to alice, not to bob");
  fs::remove(Layout().GrantFile(42));
  Grant(42, std::nullopt);
  job::RunRecord bare = Bind(62, 42);
  ASSERT_EQ(bare.decision, job::kRunRefused);
  EXPECT_NE(bare.reasons[0].find("records no run identity"), std::string::npos) << bare.reasons[0];
}

// The plugin's side trusts only a root-owned record of this job and uid;
// without one, only a job that named a pilot run is refused.
TEST_F(BindRunTest, OnlyARootRecordOfThisJobAdmitsIt) {
  Grant(42, identity_);
  Bind(70, 42);
  const std::string rec = Layout().RunFile(70);
  EXPECT_EQ(job::RunRefusal(rec, 70, 4321, true), "");
  EXPECT_NE(job::RunRefusal(rec, 71, 4321, true).find("another job's"), std::string::npos);
  EXPECT_NE(job::RunRefusal(rec, 70, 999, true).find("another job's"), std::string::npos);
  ASSERT_EQ(chown(rec.c_str(), 4321, 4321), 0);
  EXPECT_NE(job::RunRefusal(rec, 70, 4321, true).find("not a plain file of root's"),
            std::string::npos);
  EXPECT_EQ(job::RunRefusal(Layout().RunFile(72), 72, 4321, false), "") << "an unbound job runs";
  EXPECT_NE(job::RunRefusal(Layout().RunFile(72), 72, 4321, true).find("no record"),
            std::string::npos);
}

TEST(IdentityDifferences, OnePartEachNodesLeftOut) {
  const std::vector<std::string> was = {
      "config sha256:" + std::string(64, '1'), "container none",
      "pin a.py sha256:" + std::string(64, '2') + " commit " + std::string(40, '3'),
      "pin gone/ sha256:" + std::string(64, '4'), "nodes 1"};
  std::vector<std::string> now = was;
  now[2] = "pin a.py sha256:" + std::string(64, '2') + " commit " + std::string(40, '5') + " dirty";
  now[3] = "hub_model org/m commit " + std::string(40, '6') + " sha256:" + std::string(64, '7');
  now[4] = "nodes 8";
  EXPECT_EQ(job::IdentityDifferences(was, was), std::vector<std::string>{});
  EXPECT_EQ(
      job::IdentityDifferences(was, now),
      (std::vector<std::string>{
          "hub_model org/m: commit 666666666666... sha256:777777777777..., not in the piloted run",
          "pin a.py: sha256:222222222222... commit 555555555555... dirty, piloted "
          "sha256:222222222222... "
          "commit 333333333333...",
          "pin gone/: not in this run, piloted sha256:444444444444..."}));
}

}  // namespace
}  // namespace pilot
