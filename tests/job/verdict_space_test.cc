// A verdict's own space and the state directory's floor (job/reserve.h,
// StoreVerdict in job/verdict_history.h): on a file system a user keeps
// filling (every freed block taken at once, the shared reserve included),
// the verdict set aside for before the job ran is still stored; below the
// floor a new pilot is refused. Tiny tmpfs file systems, as root.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/records/verdict.h"
#include "job/reserve.h"
#include "job/verdict_history.h"
#include "tests/job/tiny_fs.h"

namespace pilot::job {
namespace {

namespace fs = std::filesystem;

std::string Body(const std::string& instance) {
  Verdict v;
  v.job = {42, "bob", "gpt-1b", std::string(64, 'a')};
  v.instance = instance;
  v.issued = "2026-11-30T04:05:06Z";
  v.expires = "2026-12-14T04:05:06Z";
  v.checks.push_back({"completed", CheckStatus::kPass, "ok", "exit 0", std::string(2000, 'd'),
                      VerifiedBy::kSupervisor});
  return VerdictToJson(v);
}

class VerdictSpaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = fs_.Mount(1024);
    if (!why.empty()) GTEST_SKIP() << why;
    fs::create_directories(Layout().VerdictsDir());
    fs::create_directories(Layout().Job(42).dir);
  }
  StateLayout Layout() const { return StateLayout(fs_.dir()); }
  std::string Space() const { return Layout().Job(42).verdict_space; }
  testutil::TinyFs fs_;
};

// Proves: the space is a new root-only file holding kVerdictSpaceBytes of
// blocks; it is never made over a file, and a full file system leaves none.
TEST_F(VerdictSpaceTest, SetAsideHoldsItsBlocks) {
  ASSERT_TRUE(SetAsideVerdictSpace(Space()).ok());
  struct stat sb {};
  ASSERT_EQ(lstat(Space().c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_GE(static_cast<int64_t>(sb.st_blocks) * 512, kVerdictSpaceBytes);
  EXPECT_FALSE(SetAsideVerdictSpace(Space()).ok()) << "O_EXCL: never over a file";
  fs::remove(Space());
  fs_.Fill();
  Status full = SetAsideVerdictSpace(Space());
  EXPECT_TRUE(IsOutOfSpace(full)) << full.ToString();
  EXPECT_FALSE(fs::exists(Space()));
}

// Proves: the case. A grabber has taken every free block (the
// reserve's too): a plain store fails, while the verdict written into the
// space the prolog set aside is stored whole, 0644, and the space is gone.
TEST_F(VerdictSpaceTest, AGrabbedFileSystemStillStoresTheVerdictFromItsSpace) {
  ASSERT_TRUE(SetAsideVerdictSpace(Space()).ok());
  fs_.Fill();
  const std::string body = Body("b2");
  ASSERT_GT(body.size(), 2000u);
  Result<StoredVerdictFile> without = StoreVerdict(Layout(), 43, "x", body);
  ASSERT_FALSE(without.ok()) << "the file system must be full for this test";
  EXPECT_TRUE(IsOutOfSpace(without.status())) << without.status().ToString();

  std::vector<std::string> lines;
  Result<StoredVerdictFile> r = StoreVerdict(
      Layout(), 42, "b2", body, [&](const std::string& l) { lines.push_back(l); }, Space());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->space_used);
  EXPECT_EQ(ReadFileLimited(Layout().VerdictFile(42), 1 << 20).value(), body);
  struct stat sb {};
  ASSERT_EQ(stat(Layout().VerdictFile(42).c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0644u);
  EXPECT_EQ(sb.st_size, static_cast<off_t>(body.size())) << "cut to the verdict's size";
  EXPECT_FALSE(fs::exists(Space()));
  EXPECT_TRUE(lines.empty()) << lines[0];
}

// Proves: an earlier instance's verdict still moves to the history when
// the new one comes from its space, and a verdict kept (the epilog ran
// twice) frees the space rather than leaving its blocks taken.
TEST_F(VerdictSpaceTest, HistoryAndKeptVerdictsWithASpace) {
  ASSERT_TRUE(StoreVerdict(Layout(), 42, "b1", Body("b1")).ok());
  ASSERT_TRUE(SetAsideVerdictSpace(Space()).ok());
  Result<StoredVerdictFile> r = StoreVerdict(Layout(), 42, "b2", Body("b2"), nullptr, Space());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->space_used);
  EXPECT_EQ(r->moved_to, Layout().VerdictHistoryFile(42, "b1"));
  ASSERT_TRUE(SetAsideVerdictSpace(Space()).ok());
  r = StoreVerdict(Layout(), 42, "b2", Body("b2"), nullptr, Space());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->kept);
  EXPECT_FALSE(fs::exists(Space()));
}

// Proves: without a space (an older job, or one the prolog could not set
// aside) the verdict is written anew, as before; a space that is not a
// plain file of its own is not written through but removed, and the
// verdict written anew, saying so.
TEST_F(VerdictSpaceTest, NoSpaceOrABadOneIsWrittenAnew) {
  Result<StoredVerdictFile> r = StoreVerdict(Layout(), 42, "b1", Body("b1"), nullptr, Space());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->space_used);
  fs::remove(Layout().VerdictFile(42));
  const std::string target = fs_.dir() + "/elsewhere";
  ASSERT_TRUE(WriteFileAtomic(target, "keep", 0600).ok());
  fs::create_symlink(target, Space());
  std::vector<std::string> lines;
  r = StoreVerdict(
      Layout(), 42, "b1", Body("b1"), [&](const std::string& l) { lines.push_back(l); }, Space());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->space_used);
  EXPECT_EQ(ReadFileLimited(target, 100).value(), "keep") << "no link followed";
  EXPECT_FALSE(fs::exists(fs::symlink_status(Space())));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("writing it anew"), std::string::npos) << lines[0];
}

// Proves: the floor is the file system's free space against state_floor_mb;
// 0 is no floor.
TEST_F(VerdictSpaceTest, FreeBelowFloor) {
  EXPECT_FALSE(FreeBelowFloor(Layout(), 0).value().has_value());
  EXPECT_FALSE(FreeBelowFloor(Layout(), 4 << 10).value().has_value());
  Result<std::optional<int64_t>> below = FreeBelowFloor(Layout(), int64_t{64} << 20);
  ASSERT_TRUE(below.ok()) << below.status().ToString();
  ASSERT_TRUE(below->has_value());
  EXPECT_LE(**below, int64_t{1} << 20);
  fs_.Fill();
  EXPECT_LT(FreeBelowFloor(Layout(), 4 << 10).value().value_or(1 << 20), 4 << 10);
  EXPECT_FALSE(FreeBelowFloor(StateLayout("/nonexistent/state"), 1).ok());
}

}  // namespace
}  // namespace pilot::job
