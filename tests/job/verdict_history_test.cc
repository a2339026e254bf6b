// StoreVerdict: the latest verdict of a job in verdicts/, the ones it
// replaced in verdicts/history/, none overwritten.
#include "job/verdict_history.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace pilot::job {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class StoreVerdictTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-history-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    fs::create_directories(layout_().VerdictsDir());
  }
  void TearDown() override { fs::remove_all(base_); }
  StateLayout layout_() const { return StateLayout(base_); }

  static std::string Body(const std::string& instance, const std::string& issued,
                          const std::string& run = "gpt-1b") {
    Verdict v;
    v.job = {42, "alice", run, std::string(64, 'a')};
    v.instance = instance;
    v.issued = issued;
    v.expires = "2026-12-14T04:05:06Z";
    return VerdictToJson(v);
  }
  Result<StoredVerdictFile> Store(const std::string& instance, const std::string& body) {
    return StoreVerdict(layout_(), 42, instance, body);
  }
  std::set<std::string> History() const {
    std::set<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(layout_().VerdictHistoryDir(), ec)) {
      names.insert(e.path().filename().string());
    }
    return names;
  }

  std::string base_;
};

TEST_F(StoreVerdictTest, FirstVerdictIsWrittenWith0644) {
  const std::string body = Body("a", "2026-11-30T04:05:06Z");
  auto r = Store("a", body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->path, layout_().VerdictFile(42));
  EXPECT_EQ(r->moved_to, "");
  EXPECT_FALSE(r->kept);
  EXPECT_EQ(r->note, "");
  EXPECT_EQ(Slurp(r->path), body);
  struct stat sb {};
  ASSERT_EQ(stat(r->path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0644u);
  EXPECT_FALSE(fs::exists(layout_().VerdictHistoryDir()));  // made only when needed
}

TEST_F(StoreVerdictTest, AnotherInstanceMovesTheStoredOneToHistory) {
  const std::string first = Body("a", "2026-11-30T04:05:06Z");
  const std::string second = Body("b", "2026-12-01T04:05:06Z");
  ASSERT_TRUE(Store("a", first).ok());
  auto r = Store("b", second);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->moved_to, layout_().VerdictHistoryDir() + "/42-a.json");
  EXPECT_EQ(r->note, "the verdict of instance a moved to " + r->moved_to);
  EXPECT_EQ(Slurp(r->moved_to), first);
  EXPECT_EQ(Slurp(layout_().VerdictFile(42)), second);
  EXPECT_EQ(History(), (std::set<std::string>{"42-a.json"}));
  struct stat sb {};
  ASSERT_EQ(stat(layout_().VerdictHistoryDir().c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0755u);
}

TEST_F(StoreVerdictTest, TheSameInstanceIsKept) {
  const std::string first = Body("a", "2026-11-30T04:05:06Z");
  ASSERT_TRUE(Store("a", first).ok());
  auto r = Store("a", Body("a", "2026-11-30T05:00:00Z", "changed"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->kept);
  EXPECT_EQ(r->note,
            "a verdict of job 42 instance a is stored already (the epilog ran twice): kept it");
  EXPECT_EQ(Slurp(layout_().VerdictFile(42)), first);
  EXPECT_TRUE(History().empty());
}

TEST_F(StoreVerdictTest, HistoryCollisionsGetSuffixes) {
  // Instance "a" comes back three times between others: no history file is
  // overwritten.
  const std::string bodies[] = {Body("a", "2026-11-30T01:00:00Z"), Body("b", "2026-11-30T02:00:00Z"),
                                Body("a", "2026-11-30T03:00:00Z"), Body("b", "2026-11-30T04:00:00Z"),
                                Body("a", "2026-11-30T05:00:00Z"), Body("c", "2026-11-30T06:00:00Z")};
  const char* instances[] = {"a", "b", "a", "b", "a", "c"};
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(Store(instances[i], bodies[i]).ok()) << i;
  EXPECT_EQ(History(), (std::set<std::string>{"42-a.json", "42-a.1.json", "42-a.2.json",
                                              "42-b.json", "42-b.1.json"}));
  const std::string h = layout_().VerdictHistoryDir() + "/";
  EXPECT_EQ(Slurp(h + "42-a.json"), bodies[0]);
  EXPECT_EQ(Slurp(h + "42-a.1.json"), bodies[2]);
  EXPECT_EQ(Slurp(h + "42-a.2.json"), bodies[4]);
  EXPECT_EQ(Slurp(h + "42-b.1.json"), bodies[3]);
  EXPECT_EQ(Slurp(layout_().VerdictFile(42)), bodies[5]);
}

TEST_F(StoreVerdictTest, NoInstanceFilesByTheIssuedTime) {
  Verdict v;
  v.issued = "2026-11-30T04:05:06Z";
  EXPECT_EQ(VerdictInstance(v), "20261130040506");
  v.instance = "abc";
  EXPECT_EQ(VerdictInstance(v), "abc");
  ASSERT_TRUE(Store("20261130040506", Body("", "2026-11-30T04:05:06Z")).ok());
  auto r = Store("x", Body("x", "2026-12-01T00:00:00Z"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->moved_to, layout_().VerdictHistoryDir() + "/42-20261130040506.json");
}

TEST_F(StoreVerdictTest, AnUnreadableStoredVerdictIsKeptInHistory) {
  std::ofstream(layout_().VerdictFile(42)) << "{not json";
  auto r = Store("a", Body("a", "2026-11-30T04:05:06Z"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->moved_to, layout_().VerdictHistoryDir() + "/42-unreadable.json");
  EXPECT_EQ(Slurp(r->moved_to), "{not json");
}

TEST_F(StoreVerdictTest, AHistoryThatIsNotAFolderIsAnError) {
  ASSERT_TRUE(Store("a", Body("a", "2026-11-30T04:05:06Z")).ok());
  std::ofstream(layout_().VerdictHistoryDir()) << "a file";
  auto r = Store("b", Body("b", "2026-12-01T04:05:06Z"));
  EXPECT_EQ(r.status().code(), Code::kIoError);
  EXPECT_EQ(r.status().ToString(), "pilot: " + layout_().VerdictHistoryDir() + ": not a directory");
  // The stored verdict is where it was.
  EXPECT_NE(Slurp(layout_().VerdictFile(42)).find("\"instance\": \"a\""), std::string::npos);
}

// A verdict the epilog could not store waits in outbox/unstored/ until
// StoreQueuedVerdicts (pilot flush) stores it; a stored one moves aside as
// StoreVerdict moves any.
TEST_F(StoreVerdictTest, AQueuedUnstoredVerdictIsStoredLater) {
  ASSERT_TRUE(Store("i1", Body("i1", "2026-11-30T04:05:06Z")).ok());
  const std::string body = Body("i2", "2026-12-01T04:05:06Z");
  Result<std::string> queued = QueueUnstoredVerdict(layout_(), 42, body);
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  EXPECT_EQ(*queued, layout_().UnstoredFile(42));
  struct stat sb {};
  ASSERT_EQ(stat(queued->c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  // Not a file the outbox posts: it lies in a folder of its own.
  EXPECT_EQ(*queued, layout_().OutboxDir() + "/unstored/42.json");
  std::ofstream(layout_().UnstoredDir() + "/43.json") << "not a verdict";

  Result<StoredQueued> r = StoreQueuedVerdicts(layout_());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stored, 1);
  EXPECT_EQ(r->kept, 1);  // 43.json stays, with its error
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_FALSE(fs::exists(*queued));
  EXPECT_EQ(Slurp(layout_().VerdictFile(42)), body);
  EXPECT_EQ(History(), (std::set<std::string>{"42-i1.json"}));
  // Nothing left to store: a second run does nothing.
  fs::remove(layout_().UnstoredDir() + "/43.json");
  EXPECT_EQ(StoreQueuedVerdicts(layout_()).value().stored, 0);
}

// Proves: a new start of job id 42 (instance "new") moves the stored
// verdict of an earlier start and the one queued for `pilot flush` into the
// history before it runs, so neither can read as the new job's (nor a flush
// put the earlier one back over the new one's); the new start's own verdict
// stays.
TEST_F(StoreVerdictTest, ANewStartRetiresTheEarlierStartsVerdicts) {
  const std::string earlier = Body("old", "2026-11-30T04:05:06Z");
  ASSERT_TRUE(Store("old", earlier).ok());
  ASSERT_TRUE(QueueUnstoredVerdict(layout_(), 42, Body("older", "2026-11-29T04:05:06Z")).ok());
  RetiredVerdicts r = RetireEarlierVerdicts(layout_(), 42, "new");
  EXPECT_TRUE(r.error.ok()) << r.error.ToString();
  EXPECT_EQ(r.moved_to.size(), 2u);
  EXPECT_FALSE(fs::exists(layout_().VerdictFile(42)));
  EXPECT_FALSE(fs::exists(layout_().UnstoredFile(42)));
  EXPECT_EQ(History(), (std::set<std::string>{"42-old.json", "42-older.json"}));
  EXPECT_EQ(Slurp(layout_().VerdictHistoryFile(42, "old")), earlier);
  struct stat sb {};
  ASSERT_EQ(stat(layout_().VerdictHistoryFile(42, "older").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0644u) << "a verdict in the history is public";
  EXPECT_EQ(StoreQueuedVerdicts(layout_()).value().stored, 0);

  // The new start's own verdict (a prolog run again for it) stays; so does
  // every other job's.
  ASSERT_TRUE(Store("new", Body("new", "2026-12-01T04:05:06Z")).ok());
  r = RetireEarlierVerdicts(layout_(), 42, "new");
  EXPECT_TRUE(r.error.ok());
  EXPECT_TRUE(r.moved_to.empty());
  EXPECT_TRUE(fs::exists(layout_().VerdictFile(42)));
  EXPECT_TRUE(RetireEarlierVerdicts(layout_(), 7, "x").moved_to.empty());
}

TEST_F(StoreVerdictTest, NoQueueIsAnEmptyQueue) {
  Result<StoredQueued> r = StoreQueuedVerdicts(layout_());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stored + r->kept, 0);
}

}  // namespace
}  // namespace pilot::job
