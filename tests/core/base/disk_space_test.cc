#include "core/base/disk_space.h"

#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <string>
#include <vector>

#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

using testutil::TempDir;

TEST(FormatSizeTest, DecimalUnitsWithOneDecimal) {
  EXPECT_EQ(FormatSize(0), "0 bytes");
  EXPECT_EQ(FormatSize(999), "999 bytes");
  EXPECT_EQ(FormatSize(1000), "1.0 kB");
  EXPECT_EQ(FormatSize(312049), "312.0 kB");
  EXPECT_EQ(FormatSize(1234567), "1.2 MB");
  EXPECT_EQ(FormatSize(128'500'000'000), "128.5 GB");
  EXPECT_EQ(FormatSize(63'249'000'000), "63.2 GB");
}

TEST(SafetensorsFileBoundTest, DataPlusHeaderPlusLastBlock) {
  // 8 + 3 * 160 + 40 + 4096 + 1000 + 65536
  EXPECT_EQ(SafetensorsFileBound(1000, 3, 40), 71160);
  EXPECT_EQ(SafetensorsFileBound(0, 0, 0), 8 + 4096 + 65536);
  // Linear in the data: a 32 GB file needs 32 GB and a few kB.
  const int64_t big = 32'000'000'000;
  EXPECT_EQ(SafetensorsFileBound(big, 291, 9000) - big, 8 + 291 * 160 + 9000 + 4096 + 65536);
}

TEST(CheckSpaceTest, FitsExactlyAndFailsOneByteOver) {
  std::vector<SpaceNeed> needs = {{"/scratch/x", "checkpoint.dir", 1000, ""}};
  EXPECT_TRUE(CheckSpace("checkpoint", needs, {{7, 1000}}).ok());
  Status s = CheckSpace("checkpoint", needs, {{7, 999}});
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_EQ(s.ToString(),
            "pilot: checkpoint: needs 1.0 kB, 999 bytes free on /scratch/x (checkpoint.dir)\n"
            "HINT: free 1 bytes on that filesystem, or set checkpoint.dir to a directory on one with room");
}

TEST(CheckSpaceTest, TheIssuesFigures) {
  Status s = CheckSpace("checkpoint", {{"/scratch/x", "checkpoint.dir", 128'500'000'000, ""}},
                        {{1, 63'200'000'000}});
  EXPECT_EQ(s.Message(), "checkpoint: needs 128.5 GB, 63.2 GB free on /scratch/x (checkpoint.dir)");
  EXPECT_EQ(s.hint(), "free 65.3 GB on that filesystem, or set checkpoint.dir to a directory on one with room");
}

TEST(CheckSpaceTest, NeedsOnOneFilesystemAreAddedUp) {
  // Each fits alone; together they do not.
  std::vector<SpaceNeed> needs = {{"/s/ckpt", "checkpoint.dir", 600'000, ""}, {"/s/out", "--out", 500'000, ""}};
  EXPECT_TRUE(CheckSpace("checkpoint", {needs[0]}, {{3, 1'000'000}}).ok());
  EXPECT_TRUE(CheckSpace("checkpoint", {needs[1]}, {{3, 1'000'000}}).ok());
  Status s = CheckSpace("checkpoint", needs, {{3, 1'000'000}, {3, 1'000'000}});
  EXPECT_EQ(s.Message(),
            "checkpoint: needs 1.1 MB, 1.0 MB free on /s/ckpt (checkpoint.dir: checkpoint.dir 600.0 kB, "
            "--out 500.0 kB on the same filesystem)");
  EXPECT_EQ(s.hint(), "free 100.0 kB on that filesystem, or set checkpoint.dir or --out to a directory on one "
                      "with room");
  // On two filesystems each is compared with its own free space.
  EXPECT_TRUE(CheckSpace("checkpoint", needs, {{3, 1'000'000}, {4, 1'000'000}}).ok());
}

// Two needs moved by one setting (a checkpoint under --out, and the run's
// writes after it): listed by what they are, the setting named once.
TEST(CheckSpaceTest, NeedsOfOneSettingAreListedByWhatTheyAre) {
  std::vector<SpaceNeed> needs = {{"/w/3/checkpoints", "--out", 17'300'000, "the checkpoint"},
                                  {"/w/3", "--out", 2'900'000, "the rest of the run"}};
  Status s = CheckSpace("checkpoint", needs, {{7, 0}, {7, 0}});
  EXPECT_EQ(s.Message(), "checkpoint: needs 20.2 MB, 0 bytes free on /w/3/checkpoints (--out: the checkpoint "
                         "17.3 MB, the rest of the run 2.9 MB on the same filesystem)");
  EXPECT_EQ(s.hint(), "free 20.2 MB on that filesystem, or set --out to a directory on one with room");
}

TEST(CheckSpaceTest, NamesTheFilesystemThatIsShort) {
  std::vector<SpaceNeed> needs = {{"/big/ckpt", "checkpoint.dir", 5'000'000'000, ""}, {"/small/out", "--out", 16 << 20, ""}};
  Status s = CheckSpace("checkpoint", needs, {{1, 9'000'000'000}, {2, 4'000'000}});
  EXPECT_EQ(s.Message(), "checkpoint: needs 16.8 MB, 4.0 MB free on /small/out (--out)");
}

TEST(CheckSpaceTest, MismatchedListsAreABug) {
  EXPECT_EQ(CheckSpace("checkpoint", {{"/a", "x", 1, ""}}, {}).code(), Code::kInternal);
}

TEST(MeasureSpaceTest, AgreesWithStatvfsAndMeasuresAMissingDirectoryAtItsParent) {
  TempDir d;
  Result<MeasuredSpace> here = MeasureSpace(d.path());
  ASSERT_TRUE(here.ok()) << here.status().ToString();
  struct statvfs v {};
  ASSERT_EQ(::statvfs(d.path().c_str(), &v), 0);
  const int64_t want = static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize);
  // Other writers may change the figure between the two calls: within 64 MB.
  EXPECT_NEAR(static_cast<double>(here->free_bytes), static_cast<double>(want), 64e6);
  Result<MeasuredSpace> below = MeasureSpace(d / "not/yet/made");
  ASSERT_TRUE(below.ok()) << below.status().ToString();
  EXPECT_EQ(below->device, here->device);
  // A need larger than the whole filesystem never fits.
  const int64_t total = static_cast<int64_t>(v.f_blocks) * static_cast<int64_t>(v.f_frsize);
  Status s = CheckFreeSpace("checkpoint", {{d / "ckpt", "checkpoint.dir", total + 1, ""}});
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.Message().find("free on " + d / "ckpt" + " (checkpoint.dir)"), std::string::npos) << s.Message();
  EXPECT_TRUE(CheckFreeSpace("checkpoint", {{d / "ckpt", "checkpoint.dir", 1, ""}}).ok());
}

TEST(MeasureSpaceTest, AnUnreadablePathIsAnError) {
  TempDir d;
  testutil::WriteText(d / "file", "x");
  // A path below a regular file: stat says ENOTDIR, not ENOENT.
  Result<MeasuredSpace> m = MeasureSpace(d / "file/below");
  EXPECT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kIoError);
}

}  // namespace
}  // namespace pilot
