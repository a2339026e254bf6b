// StateLayout: every path under the state directory, job ids, and that no
// path leaves the state directory. EnsureStateDir: the folders it makes.
#include "job/state_layout.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "job/state_dir.h"

namespace pilot::job {
namespace {

TEST(StateLayout, EveryPath) {
  const StateLayout l("/var/lib/slurm-pilot");
  EXPECT_EQ(l.root(), "/var/lib/slurm-pilot");
  EXPECT_EQ(l.JobsDir(), "/var/lib/slurm-pilot/jobs");
  EXPECT_EQ(l.VerdictsDir(), "/var/lib/slurm-pilot/verdicts");
  EXPECT_EQ(l.OutboxDir(), "/var/lib/slurm-pilot/outbox");
  EXPECT_EQ(l.GrantsDir(), "/var/lib/slurm-pilot/grants");
  const JobPaths p = l.Job(4242);
  EXPECT_EQ(p.dir, "/var/lib/slurm-pilot/jobs/4242");
  EXPECT_EQ(p.config, "/var/lib/slurm-pilot/jobs/4242/config.toml");
  EXPECT_EQ(p.lock, "/var/lib/slurm-pilot/jobs/4242/lock.json");
  EXPECT_EQ(p.started, "/var/lib/slurm-pilot/jobs/4242/runner.started");
  EXPECT_EQ(p.work, "/var/lib/slurm-pilot/jobs/4242/work");
  EXPECT_EQ(p.metrics, "/var/lib/slurm-pilot/jobs/4242/metrics");
  EXPECT_EQ(p.verdict_space, "/var/lib/slurm-pilot/jobs/4242/verdict.space");
  EXPECT_EQ(p.CheckpointFiles("single"),
            "/var/lib/slurm-pilot/jobs/4242/checkpoint-files-single.json");
  EXPECT_EQ(p.CheckpointFiles("node"), "/var/lib/slurm-pilot/jobs/4242/checkpoint-files-node.json");
  EXPECT_EQ(l.VerdictFile(4242), "/var/lib/slurm-pilot/verdicts/4242.json");
  EXPECT_EQ(l.VerdictHistoryDir(), "/var/lib/slurm-pilot/verdicts/history");
  EXPECT_EQ(l.VerdictHistoryFile(4242, "a1b2"), "/var/lib/slurm-pilot/verdicts/history/4242-a1b2.json");
  EXPECT_EQ(l.VerdictHistoryFile(4242, "a1b2", 3),
            "/var/lib/slurm-pilot/verdicts/history/4242-a1b2.3.json");
  EXPECT_EQ(l.GrantFile(4242), "/var/lib/slurm-pilot/grants/4242.json");
  EXPECT_EQ(StateLayout::ResultsIn(p.work), "/var/lib/slurm-pilot/jobs/4242/work/results.json");
  EXPECT_EQ(StateLayout::ResultsIn("/home/alice/out"), "/home/alice/out/results.json");
}

TEST(StateLayout, WorkRootHoldsTheWorkFoldersOnly) {
  const StateLayout l("/var/lib/slurm-pilot", "/scratch/pilot-work");
  EXPECT_EQ(l.work_root(), "/scratch/pilot-work");
  const JobPaths p = l.Job(4242);
  EXPECT_EQ(p.work, "/scratch/pilot-work/4242");
  EXPECT_EQ(StateLayout::ResultsIn(p.work), "/scratch/pilot-work/4242/results.json");
  // Everything else stays under the state directory.
  EXPECT_EQ(p.dir, "/var/lib/slurm-pilot/jobs/4242");
  EXPECT_EQ(p.lock, "/var/lib/slurm-pilot/jobs/4242/lock.json");
  EXPECT_EQ(l.WorkAtticDir(), "/scratch/pilot-work/attic");
  EXPECT_EQ(l.WorkAtticFor(4242, "ab12"), "/scratch/pilot-work/attic/4242-ab12");
  EXPECT_EQ(l.ReserveFile(), "/var/lib/slurm-pilot/reserve");
  // Without a work root: as it always was, and no work attic.
  const StateLayout old("/var/lib/slurm-pilot");
  EXPECT_EQ(old.Job(4242).work, "/var/lib/slurm-pilot/jobs/4242/work");
  EXPECT_EQ(old.WorkAtticDir(), "");
  EXPECT_EQ(old.UnstoredDir(), "/var/lib/slurm-pilot/outbox/unstored");
  EXPECT_EQ(old.UnstoredFile(4242), "/var/lib/slurm-pilot/outbox/unstored/4242.json");
  // A work folder is never a folder of the state directory's own.
  EXPECT_NE(l.Job(4242).work, l.WorkAtticDir());
}

TEST(StateLayout, JobIdsAreDecimal) {
  const StateLayout l("/s");
  EXPECT_EQ(l.Job(0).dir, "/s/jobs/0");
  EXPECT_EQ(l.Job(7).lock, "/s/jobs/7/lock.json");
  EXPECT_EQ(l.Job(4294967295).dir, "/s/jobs/4294967295");  // Slurm's largest
  EXPECT_EQ(l.VerdictFile(999999999999), "/s/verdicts/999999999999.json");
  EXPECT_NE(l.Job(1).dir, l.Job(10).dir);
}

TEST(StateLayout, NoPathOutsideTheStateDir) {
  for (const std::string root : {"/var/lib/slurm-pilot", "/s", "/srv/pilot state"}) {
    const StateLayout l(root);
    std::vector<std::string> paths = {l.JobsDir(), l.VerdictsDir(), l.VerdictHistoryDir(),
                                      l.OutboxDir(), l.GrantsDir(), l.ReserveFile(),
                                      l.UnstoredDir()};
    for (int64_t id : {int64_t{0}, int64_t{17}, int64_t{4294967295}}) {
      const JobPaths p = l.Job(id);
      for (const std::string& path :
           {p.dir, p.config, p.lock, p.started, p.work, p.metrics, p.verdict_space,
            p.CheckpointFiles("single"),
            p.CheckpointFiles("node"), l.VerdictFile(id), l.GrantFile(id), l.UnstoredFile(id),
            StateLayout::ResultsIn(p.work), l.VerdictHistoryFile(id, "i"),
            l.VerdictHistoryFile(id, "i", 1)}) {
        paths.push_back(path);
      }
    }
    std::set<std::string> distinct;
    for (const std::string& path : paths) {
      ASSERT_EQ(path.rfind(root + "/", 0), 0u) << path;
      const std::string rest = path.substr(root.size() + 1);
      EXPECT_FALSE(rest.empty()) << path;
      EXPECT_EQ(rest.find("//"), std::string::npos) << path;
      EXPECT_NE(rest.front(), '/') << path;
      for (const std::string& part : {std::string("/../"), std::string("/./")}) {
        EXPECT_EQ(("/" + rest + "/").find(part), std::string::npos) << path;
      }
      distinct.insert(path);
    }
    EXPECT_EQ(distinct.size(), paths.size()) << "two things share a path under " << root;
    // A job's folder holds its own files only.
    const JobPaths p = l.Job(17);
    for (const std::string& f :
         {p.config, p.lock, p.started, p.work, p.metrics, p.verdict_space,
          p.CheckpointFiles("single")}) {
      EXPECT_EQ(f.rfind(p.dir + "/", 0), 0u) << f;
    }
    EXPECT_EQ(p.dir.rfind(l.JobsDir() + "/", 0), 0u);
    EXPECT_EQ(l.VerdictFile(17).rfind(l.VerdictsDir() + "/", 0), 0u);
    EXPECT_EQ(l.GrantFile(17).rfind(l.GrantsDir() + "/", 0), 0u);
  }
}

TEST(StateLayout, ParseJobId) {
  struct Case {
    std::string word;
    std::optional<int64_t> want;
  };
  for (const Case& c : std::vector<Case>{{"4242", 4242},
                                         {"0", 0},
                                         {"007", 7},
                                         {"999999999999", 999999999999},
                                         {"", std::nullopt},
                                         {"1234567890123", std::nullopt},
                                         {"-1", std::nullopt},
                                         {"+1", std::nullopt},
                                         {"12x", std::nullopt},
                                         {" 12", std::nullopt},
                                         {"4242.json", std::nullopt},
                                         {"/tmp/results.json", std::nullopt}}) {
    EXPECT_EQ(StateLayout::ParseJobId(c.word), c.want) << '"' << c.word << '"';
  }
}

TEST(StateLayout, JobOfVerdictFile) {
  const StateLayout l("/s");
  const std::string name = std::filesystem::path(l.VerdictFile(4242)).filename().string();
  EXPECT_EQ(StateLayout::JobOfVerdictFile(name), 4242);
  EXPECT_EQ(StateLayout::JobOfVerdictFile("17.json"), 17);
  for (const std::string other : {".json", "4242", "4242.json.tmp", ".4242.json", "x.json",
                                  "1234567890123.json", "42.JSON", ""}) {
    EXPECT_EQ(StateLayout::JobOfVerdictFile(other), std::nullopt) << other;
  }
}

// Whatever the prolog recorded as the instance, the name stays one file in
// the history folder.
TEST(StateLayout, VerdictHistoryFileNames) {
  const StateLayout l("/s");
  EXPECT_EQ(l.VerdictHistoryFile(7, "../../etc/passwd"), "/s/verdicts/history/7-.._.._etc_passwd.json");
  EXPECT_EQ(l.VerdictHistoryFile(7, "a b\n/c"), "/s/verdicts/history/7-a_b__c.json");
  EXPECT_EQ(l.VerdictHistoryFile(7, ""), "/s/verdicts/history/7-none.json");
  EXPECT_EQ(l.VerdictHistoryFile(7, std::string(100, 'x')),
            "/s/verdicts/history/7-" + std::string(64, 'x') + ".json");
  EXPECT_EQ(StateLayout::JobOfHistoryFile("7-abc.json"), 7);
  EXPECT_EQ(StateLayout::JobOfHistoryFile("4242-abc.2.json"), 4242);
  for (const std::string other : {"7.json", "7-.json", "x-abc.json", "-abc.json", "7-abc",
                                  "7-abc.json.tmp", ".7-abc.json", ""}) {
    EXPECT_EQ(StateLayout::JobOfHistoryFile(other), std::nullopt) << other;
  }
  // A history name is never taken for a job's latest verdict.
  EXPECT_EQ(StateLayout::JobOfVerdictFile("7-abc.json"), std::nullopt);
  EXPECT_EQ(StateLayout::JobOfVerdictFile("history"), std::nullopt);
}

class StateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-state-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  static mode_t Mode(const std::string& path) {
    struct stat sb {};
    return lstat(path.c_str(), &sb) == 0 ? (sb.st_mode & 07777) : 0;
  }
  std::string base_;
};

TEST_F(StateDirTest, MakesTheFoldersWithTheirModes) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown to root)";
  const StateLayout l(base_ + "/state");
  ASSERT_TRUE(EnsureStateDir(l).ok());
  EXPECT_EQ(Mode(l.root()), 0755u);
  EXPECT_EQ(Mode(l.JobsDir()), 0755u);
  EXPECT_EQ(Mode(l.VerdictsDir()), 0755u);
  EXPECT_EQ(Mode(l.OutboxDir()), 0700u);
  // A second run finds them, and puts back a mode that was changed.
  ASSERT_EQ(chmod(l.OutboxDir().c_str(), 0777), 0);
  ASSERT_TRUE(EnsureStateDir(l).ok());
  EXPECT_EQ(Mode(l.OutboxDir()), 0700u);
}

TEST_F(StateDirTest, RefusesWhatIsNotAFolder) {
  const StateLayout l(base_);
  std::ofstream(l.JobsDir()) << "not a folder";
  Status s = EnsureStateDir(l);
  if (geteuid() != 0) {
    // The state directory itself cannot be given to root.
    EXPECT_EQ(s.code(), Code::kPermission) << s.ToString();
    return;
  }
  EXPECT_EQ(s.code(), Code::kIoError) << s.ToString();
  EXPECT_NE(s.ToString().find("not a directory"), std::string::npos) << s.ToString();
  ASSERT_TRUE(std::filesystem::remove(l.JobsDir()));
  std::filesystem::create_directory_symlink("/tmp", l.JobsDir());
  s = EnsureStateDir(l);
  EXPECT_EQ(s.code(), Code::kIoError) << "a link is not followed: " << s.ToString();
}

}  // namespace
}  // namespace pilot::job
