// Proves: a work folder's bytes are the blocks its files take (a link's
// target elsewhere not counted, an unreadable tree is no figure), and the
// guard acts only where the work folder shares the state file system and
// only when a floor is set.
#include "supervisor/work_guard.h"

#include "tests/core/net_test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace pilot::supervisor {
namespace {

class WorkGuardTest : public ::testing::Test {
 protected:
  testutil::TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

TEST_F(WorkGuardTest, AFoldersBytesAreItsFilesBlocks) {
  std::filesystem::create_directories(dir_ + "/work/sub");
  std::filesystem::create_directories(dir_ + "/elsewhere");
  {
    std::ofstream big(dir_ + "/work/sub/a");
    big << std::string(3 << 20, 'x');
    std::ofstream away(dir_ + "/elsewhere/b");
    away << std::string(8 << 20, 'y');
  }
  std::filesystem::create_symlink(dir_ + "/elsewhere", dir_ + "/work/link");
  std::optional<int64_t> bytes = FolderBytes(dir_ + "/work");
  ASSERT_TRUE(bytes.has_value());
  EXPECT_GE(*bytes, 3 << 20);
  EXPECT_LT(*bytes, 4 << 20);  // the link's 8 MiB are not the folder's
  EXPECT_FALSE(FolderBytes(dir_ + "/missing").has_value());
}

TEST_F(WorkGuardTest, GuardsOnlyAWorkFolderOnTheStateFileSystemWithAFloor) {
  std::filesystem::create_directories(dir_ + "/state");
  std::filesystem::create_directories(dir_ + "/work");
  EXPECT_TRUE(WorkGuard(job::StateLayout(dir_ + "/state", ""), dir_ + "/work", 64 << 20).guarding());
  EXPECT_FALSE(WorkGuard(job::StateLayout(dir_ + "/state", ""), dir_ + "/work", 0).guarding());
  // /proc is another file system than the one under /tmp.
  EXPECT_FALSE(WorkGuard(job::StateLayout(dir_ + "/state", ""), "/proc", 64 << 20).guarding());
  // Far from the floor: nothing to say, however often asked.
  WorkGuard g(job::StateLayout(dir_ + "/state", ""), dir_ + "/work", 1);
  EXPECT_FALSE(g.Check().has_value());
}

}  // namespace
}  // namespace pilot::supervisor
