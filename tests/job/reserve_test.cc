// The state directory's reserve: made when there is room, released by a
// write that finds the file system full, which then succeeds; whole files
// only.
#include "job/reserve.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "tests/job/tiny_fs.h"

namespace pilot::job {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kReserve = 256 << 10;

TEST(Reserve, OutOfSpaceIsENOSPCOrEDQUOT) {
  EXPECT_TRUE(IsOutOfSpace(Status::IoError("/s/lock.json", std::strerror(ENOSPC))));
  EXPECT_TRUE(IsOutOfSpace(Status::IoError("write", std::strerror(EDQUOT))));
  EXPECT_FALSE(IsOutOfSpace(Status::IoError("/s/lock.json", std::strerror(EIO))));
  EXPECT_FALSE(IsOutOfSpace(Status::Ok()));
}

class ReserveOnTinyFs : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = fs_.Mount(1024);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  StateLayout Layout() const { return StateLayout(fs_.dir()); }
  testutil::TinyFs fs_;
};

TEST_F(ReserveOnTinyFs, MadeWithItsSizeRootOnlyAndRemovedAtZero) {
  Result<bool> made = EnsureReserve(Layout(), kReserve);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_TRUE(*made);
  struct stat sb {};
  ASSERT_EQ(lstat(Layout().ReserveFile().c_str(), &sb), 0);
  EXPECT_EQ(sb.st_size, kReserve);
  EXPECT_GE(static_cast<int64_t>(sb.st_blocks) * 512, kReserve);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_TRUE(EnsureReserve(Layout(), kReserve).value());  // there already
  EXPECT_FALSE(EnsureReserve(Layout(), 0).value());
  EXPECT_FALSE(fs::exists(Layout().ReserveFile()));
}

TEST_F(ReserveOnTinyFs, AFullDiskReleasesTheReserveAndTheWriteSucceeds) {
  ASSERT_TRUE(EnsureReserve(Layout(), kReserve).value());
  fs_.Fill();
  const std::string lock = fs_.dir() + "/lock.json";
  const std::string body(8 << 10, '{');
  // Without the reserve this write fails: the disk is full.
  Status plain = WriteFileAtomic(lock, body, 0644);
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(IsOutOfSpace(plain)) << plain.ToString();

  std::vector<std::string> lines;
  Status s = WriteWithReserve(Layout(), lock, body, 0644,
                              [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadFileLimited(lock, 1 << 20).value(), body);
  EXPECT_FALSE(fs::exists(Layout().ReserveFile()));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("released its reserve"), std::string::npos) << lines[0];

  // Full again, and no reserve left: the write fails, no file half-written.
  fs_.Fill();
  const std::string verdict = fs_.dir() + "/verdict.json";
  lines.clear();
  s = WriteWithReserve(Layout(), verdict, body, 0644,
                       [&](const std::string& l) { lines.push_back(l); });
  EXPECT_TRUE(IsOutOfSpace(s)) << s.ToString();
  EXPECT_FALSE(fs::exists(verdict));
  for (const auto& e : fs::directory_iterator(fs_.dir())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("used up already"), std::string::npos) << lines[0];

  // Not made again while full; made again once there is room.
  EXPECT_FALSE(EnsureReserve(Layout(), kReserve).value());
  EXPECT_FALSE(fs::exists(Layout().ReserveFile()));
  fs_.Unfill();
  EXPECT_TRUE(EnsureReserve(Layout(), kReserve).value());
}

TEST_F(ReserveOnTinyFs, OtherFailuresAreNotRetried) {
  ASSERT_TRUE(EnsureReserve(Layout(), kReserve).value());
  Status s = WriteWithReserve(Layout(), fs_.dir() + "/missing/lock.json", "{}", 0644, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(fs::exists(Layout().ReserveFile()));
}

}  // namespace
}  // namespace pilot::job
