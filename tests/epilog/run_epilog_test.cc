// RunEpilog's signing and storing: both signatures when both keys are
// there, a note for a missing one, a replaced verdict kept in the history,
// an epilog that runs twice for one instance.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/base/crypto.h"
#include "core/records/verdict.h"
#include "epilog/epilog.h"
#include "job/state_layout.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

class RunEpilogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "RunEpilog makes root-owned folders";
    char tmpl[] = "/tmp/pilot-run-epilog-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    policy_.state_dir = dir_ + "/state";
    policy_.key_file = dir_ + "/hmac.key";
    policy_.signing_key_file = dir_ + "/ed.key";
    policy_.public_key_file = dir_ + "/ed.pub";
    policy_.runner_path = "/nonexistent/pilot-runner";
    Write(policy_.key_file, NewKeyFileContents().value(), 0600);
    Result<Ed25519KeyFiles> pair = NewEd25519KeyFiles();
    ASSERT_TRUE(pair.ok());
    Write(policy_.signing_key_file, pair->private_pem, 0600);
    Write(policy_.public_key_file, pair->public_pem, 0644);
    public_key_ = pair->public_key;
    job_.job_id = 42;
    job_.uid = getuid();
    job_.gid = getgid();
    job_.is_pilot = true;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // A world where the results are missing and the decision is fixed.
  epilog::EpilogDeps Deps(const std::string& instance, const std::string& issued) {
    epilog::EpilogDeps d;
    d.now_unix = [] { return int64_t{1'800'000'000}; };
    d.run = [](const job::CommandSpec&) -> Result<job::CommandResult> {
      job::CommandResult r;
      r.exit_code = 1;
      return r;
    };
    d.decide = [instance, issued](const epilog::EpilogInputs& in,
                                  const Policy&) -> Result<Verdict> {
      Verdict v;
      v.job.id = in.job.job_id;
      v.job.user = "alice";
      v.instance = instance;
      v.issued = issued;
      v.expires = "2099-01-01T00:00:00Z";
      return v;
    };
    return d;
  }

  std::string dir_;
  Policy policy_;
  job::JobEnv job_;
  std::string public_key_;
};

TEST_F(RunEpilogTest, SignsWithBothKeysAndStores) {
  auto r = epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:00:00Z"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signed_ok);
  EXPECT_TRUE(r->signed_ed25519);
  EXPECT_EQ(r->note, "");
  EXPECT_EQ(r->verdict_path, job::StateLayout(policy_.state_dir).VerdictFile(42));
  Result<Verdict> v = ReadVerdict(r->verdict_path);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->instance, "i1");
  EXPECT_TRUE(VerifyVerdictEd25519(*v, public_key_).ok());
  EXPECT_TRUE(VerifyVerdictHmac(*v, ReadKeyFile(policy_.key_file).value()).ok());
}

TEST_F(RunEpilogTest, AMissingEd25519KeyIsANote) {
  fs::remove(policy_.signing_key_file);
  auto r = epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:00:00Z"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signed_ok);
  EXPECT_FALSE(r->signed_ed25519);
  EXPECT_EQ(r->note.rfind("no ed25519 signature: " + policy_.signing_key_file, 0), 0u) << r->note;
  Result<Verdict> v = ReadVerdict(r->verdict_path);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->signature_ed25519, "");
  EXPECT_NE(v->signature, "");
}

TEST_F(RunEpilogTest, ARerunKeepsTheFirstAndANewInstanceMovesIt) {
  ASSERT_TRUE(epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:00:00Z")).ok());
  auto twice = epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:05:00Z"));
  ASSERT_TRUE(twice.ok());
  EXPECT_NE(twice->note.find("the epilog ran twice"), std::string::npos) << twice->note;
  EXPECT_EQ(ReadVerdict(twice->verdict_path).value().issued, "2026-11-30T00:00:00Z");

  auto next = epilog::RunEpilog(policy_, job_, Deps("i2", "2026-12-01T00:00:00Z"));
  ASSERT_TRUE(next.ok());
  const job::StateLayout layout(policy_.state_dir);
  EXPECT_EQ(next->history_path, layout.VerdictHistoryFile(42, "i1"));
  EXPECT_EQ(ReadVerdict(next->history_path).value().issued, "2026-11-30T00:00:00Z");
  EXPECT_EQ(ReadVerdict(next->verdict_path).value().instance, "i2");
}

// A job of several nodes: the first node's epilog makes the verdict even
// when the pilot never started there (no runner.started: a lock that could
// not be written); the other nodes' epilogs make none. In a state directory
// the nodes share (the first node's job folder in sight) another node's
// record stays for the first node's epilog, which compares it with the
// lock and keeps it beside it; elsewhere its own epilog removes it.
TEST_F(RunEpilogTest, OnlyTheJobsFirstNodeMakesTheVerdict) {
  job_.nodes = 2;
  job_.node_list = "pn[1-2]";
  job_.host = "pn2";
  const job::StateLayout layout(policy_.state_dir);
  // The first node's prolog made the job's folder and lock.
  fs::create_directories(layout.Job(42).dir);
  Lock lock;
  lock.instance = "i1";
  lock.job.id = 42;
  lock.job.nodes = 2;
  lock.job.host = "pn1";
  lock.versions = {{"libtorch", "2.4.1"}};
  Write(layout.Job(42).lock, LockToJson(lock), 0644);
  fs::create_directories(layout.NodeRecordsDir(42));
  Lock pins;
  pins.job.id = 42;
  pins.job.host = "pn2";
  pins.seeds.source = "job_id";
  pins.container.method = "none";
  pins.created = "2026-11-30T00:00:00Z";
  Write(layout.NodeRecordFile(42, "pn2"), LockToJson(pins), 0644);
  auto other = epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:00:00Z"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE(other->skipped);
  EXPECT_NE(other->note.find("node pn2: the pilot ran on the job's first node, pn1, whose epilog makes the "
                             "verdict and keeps this node's pins"),
            std::string::npos)
      << other->note;
  EXPECT_FALSE(fs::exists(layout.VerdictFile(42)));
  EXPECT_TRUE(fs::exists(layout.NodeRecordFile(42, "pn2")));

  job_.host = "pn1";
  // What the first node's decision gets: pn2's record (and nothing of its own).
  std::vector<OtherNodePins> seen = epilog::OtherNodesPins(layout, job_);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].node, "pn2");
  ASSERT_TRUE(seen[0].pins.has_value()) << seen[0].problem;
  EXPECT_EQ(seen[0].pins->job.host, "pn2");
  auto first = epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:00:00Z"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->skipped);
  EXPECT_EQ(first->verdict_path, layout.VerdictFile(42));
  EXPECT_FALSE(fs::exists(layout.NodeRecordsDir(42)));
  Result<Lock> kept = ReadLock(layout.KeptNodeRecordFile(42, "pn2"));
  ASSERT_TRUE(kept.ok()) << kept.status().ToString() << first->note;
  EXPECT_EQ(kept->job.host, "pn2");
  EXPECT_TRUE(epilog::OtherNodesPins(layout, job_).empty()) << "kept, not read again";
  // A node whose prolog wrote nothing is named.
  fs::create_directories(layout.NodeRecordsDir(42));
  seen = epilog::OtherNodesPins(layout, job_);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].pins.has_value());
  EXPECT_EQ(seen[0].problem, "its prolog left no record");
  fs::remove(layout.NodeRecordsDir(42));

  // A job whose folder this node cannot see: its record is its own to remove.
  job_.job_id = 44;
  job_.host = "pn2";
  fs::create_directories(layout.NodeRecordsDir(44));
  Write(layout.NodeRecordFile(44, "pn2"), "{}", 0644);
  auto alone = epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:00:00Z"));
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(alone->skipped);
  EXPECT_FALSE(fs::exists(layout.NodeRecordsDir(44))) << "its record and the emptied folder are gone";

  // Without a node list, the node where the pilot started judges it.
  job_.job_id = 43;
  job_.host = "pn1";
  job_.node_list = "";
  auto unknown = epilog::RunEpilog(policy_, job_, Deps("i1", "2026-11-30T00:00:00Z"));
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE(unknown->skipped);
  EXPECT_EQ(unknown->note, "the pilot did not run on this node");
}

// What scontrol says of a job's nodes: the ones Slurm took down, with why.
TEST(NodesDown, TheDownNodesOfScontrolsLines) {
  const std::string out =
      "NodeName=pn1 Arch=x86_64 CoresPerSocket=1 State=IDLE ThreadsPerCore=1 Reason=\n"
      "NodeName=pn2 Arch=x86_64 State=DOWN*+NOT_RESPONDING Weight=1 Reason=Not responding "
      "[slurm@2026-12-02T06:01:05]\n"
      "NodeName=pn3 State=IDLE+NOT_RESPONDING\n"
      "NodeName=pn4 State=MIXED+DRAIN Reason=maintenance [root@2026-12-02T06:01:05]\n"
      "NodeName=pn5 State=FUTURE+FAIL Reason=bad dimm\n"
      "garbage line\n";
  EXPECT_EQ(epilog::NodesDownIn(out),
            std::vector<std::string>({"pn2 (Not responding)", "pn3 (IDLE+NOT_RESPONDING)", "pn5 (bad dimm)"}));
  EXPECT_TRUE(epilog::NodesDownIn("").empty());
}

// A post that no longer fits in the epilog's time is not tried: the
// verdict is stored and queued for `pilot flush`.
TEST_F(RunEpilogTest, APostThatDoesNotFitTheBudgetIsQueued) {
  policy_.notify_url = "http://127.0.0.1:9/v";
  policy_.notify_timeout_seconds = 10;
  policy_.notify_retries = 1;  // 20.5 s at worst
  policy_.epilog_timeout_seconds = 60;
  int posts = 0;
  int queued = 0;
  epilog::EpilogDeps deps = Deps("i1", "2026-11-30T00:00:00Z");
  deps.post = [&](const Policy&, const std::string&, const std::string&) {
    ++posts;
    return Status::Ok();
  };
  deps.enqueue = [&](const Policy&, int64_t, const std::string&) {
    ++queued;
    return Status::Ok();
  };
  deps.elapsed_seconds = [] { return 30.0; };  // 30 left: 5 to store, 20.5 to post
  auto r = epilog::RunEpilog(policy_, job_, deps);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->posted);
  EXPECT_EQ(posts, 1);

  job_.job_id = 43;
  deps.elapsed_seconds = [] { return 40.0; };  // 20 left
  r = epilog::RunEpilog(policy_, job_, deps);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->posted);
  EXPECT_TRUE(r->queued);
  EXPECT_EQ(posts, 1);
  EXPECT_EQ(queued, 1);
  EXPECT_NE(r->note.find("not posted: too little of epilog_timeout_seconds left (queued in outbox)"),
            std::string::npos)
      << r->note;
  EXPECT_TRUE(ReadVerdict(r->verdict_path).ok());
}

}  // namespace
}  // namespace pilot
