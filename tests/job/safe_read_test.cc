// ReadFileBeneath: links at any depth, FIFOs, devices, "..", size limits;
// PathBelow.
#include "job/safe_read.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace pilot {
namespace {

namespace fs = std::filesystem;

class SafeReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-safe-read-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/job/work/sub");
    fs::create_directories(dir_ + "/elsewhere");
    Write(dir_ + "/secret", "SECRET-4242\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::string Job() const { return dir_ + "/job"; }

  std::string dir_;
};

TEST_F(SafeReadTest, ReadsARegularFile) {
  Write(Job() + "/work/results.json", "{\"a\": 1}\n");
  Result<std::string> r = job::ReadFileBeneath(Job(), "work/results.json", 1024);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "{\"a\": 1}\n");
  Write(Job() + "/work/sub/deep.txt", "");
  r = job::ReadFileBeneath(Job(), "work/sub/deep.txt", 0);  // empty fits a limit of 0
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "");
  // The trusted folder may be given with a trailing slash.
  r = job::ReadFileBeneath(Job() + "/", "work/sub/deep.txt", 0);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(SafeReadTest, RefusesALinkAsTheFile) {
  fs::create_symlink(dir_ + "/secret", Job() + "/work/metrics.jsonl");
  Result<std::string> r = job::ReadFileBeneath(Job(), "work/metrics.jsonl", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermission);
  EXPECT_EQ(r.status().ToString(),
            "pilot: " + Job() +
                "/work/metrics.jsonl: is a symbolic link (not followed: the job's folder belongs "
                "to its user)");
  // A relative link and a dangling one are refused the same way.
  fs::create_symlink("../../secret", Job() + "/work/rel");
  fs::create_symlink(dir_ + "/missing", Job() + "/work/dangling");
  for (const char* name : {"work/rel", "work/dangling"}) {
    r = job::ReadFileBeneath(Job(), name, 1024);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), Code::kPermission) << name;
    EXPECT_NE(r.status().Message().find("is a symbolic link"), std::string::npos)
        << r.status().ToString();
  }
}

TEST_F(SafeReadTest, RefusesALinkAsAFolderInTheMiddle) {
  Write(dir_ + "/elsewhere/results.json", "SECRET-4242\n");
  fs::create_directory_symlink(dir_ + "/elsewhere", Job() + "/work/out");
  Result<std::string> r = job::ReadFileBeneath(Job(), "work/out/results.json", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermission);
  EXPECT_EQ(r.status().Message(), Job() +
                                      "/work/out: is a symbolic link (not followed: the job's "
                                      "folder belongs to its user)");
  // The work folder itself replaced by a link.
  fs::remove_all(Job() + "/work");
  fs::create_directory_symlink(dir_ + "/elsewhere", Job() + "/work");
  r = job::ReadFileBeneath(Job(), "work/results.json", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermission);
  EXPECT_NE(r.status().Message().find(Job() + "/work: is a symbolic link"), std::string::npos)
      << r.status().ToString();
}

TEST_F(SafeReadTest, RefusesAFifoWithoutBlocking) {
  ASSERT_EQ(mkfifo((Job() + "/work/results.json").c_str(), 0644), 0);
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::string> r = job::ReadFileBeneath(Job(), "work/results.json", 1024);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kIoError);
  EXPECT_EQ(r.status().Message(), Job() + "/work/results.json: not a regular file (a FIFO)");
}

TEST_F(SafeReadTest, RefusesFoldersAndDevices) {
  Result<std::string> r = job::ReadFileBeneath(Job(), "work/sub", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().Message(), Job() + "/work/sub: not a regular file (a directory)");
  // A device reached through a link is a link; /dev/null read from /dev is a
  // device, refused before it is opened.
  r = job::ReadFileBeneath("/dev", "null", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().Message(), "/dev/null: not a regular file (a device)");
  // A file where a folder is wanted.
  Write(Job() + "/work/plain", "x");
  r = job::ReadFileBeneath(Job(), "work/plain/results.json", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kIoError);
  EXPECT_EQ(r.status().Message(), Job() + "/work/plain: not a directory");
}

TEST_F(SafeReadTest, RefusesDotDotAbsoluteAndEmptyComponents) {
  Write(Job() + "/work/results.json", "{}");
  for (const char* rel : {"../secret", "work/../../secret", "work/..", "/etc/passwd", "",
                          "work//results.json", "./work/results.json", "work/results.json/"}) {
    Result<std::string> r = job::ReadFileBeneath(Job(), rel, 1024);
    ASSERT_FALSE(r.ok()) << rel;
    EXPECT_EQ(r.status().code(), Code::kInvalid) << rel << ": " << r.status().ToString();
  }
  Result<std::string> r = job::ReadFileBeneath(Job(), "../secret", 1024);
  EXPECT_EQ(r.status().ToString(), "pilot: " + Job() +
                                       "/../secret: every component must be a name (no \"\", "
                                       "\".\" or \"..\")");
}

TEST_F(SafeReadTest, RefusesAFileLargerThanTheLimit) {
  Write(Job() + "/work/metrics.jsonl", std::string(100, 'x'));
  Result<std::string> r = job::ReadFileBeneath(Job(), "work/metrics.jsonl", 99);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  EXPECT_EQ(r.status().Message(), Job() + "/work/metrics.jsonl: larger than 99 bytes");
  r = job::ReadFileBeneath(Job(), "work/metrics.jsonl", 100);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 100u);
}

TEST_F(SafeReadTest, MissingFilesAreNotFound) {
  Result<std::string> r = job::ReadFileBeneath(Job(), "work/results.json", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().Message(), Job() + "/work/results.json: no such file");
  r = job::ReadFileBeneath(Job(), "gone/results.json", 1024);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  r = job::ReadFileBeneath(dir_ + "/nojob", "work/results.json", 1024);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST_F(SafeReadTest, ATrustedFolderThatIsALinkIsRefused) {
  fs::create_directory_symlink(Job(), dir_ + "/joblink");
  Write(Job() + "/work/results.json", "{}");
  Result<std::string> r = job::ReadFileBeneath(dir_ + "/joblink", "work/results.json", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermission);
}

TEST(PathBelow, TheRestOfAPathInsideAFolder) {
  EXPECT_EQ(job::PathBelow("/state/jobs", "/state/jobs/12/work/results.json"),
            "12/work/results.json");
  EXPECT_EQ(job::PathBelow("/state/jobs/", "/state/jobs/12/work/results.json"),
            "12/work/results.json");
  EXPECT_EQ(job::PathBelow("/state/jobs", "/state/./jobs/12/x/../work/results.json"),
            "12/work/results.json");
  EXPECT_EQ(job::PathBelow("/state/jobs", "/state/jobs"), std::nullopt);
  EXPECT_EQ(job::PathBelow("/state/jobs", "/state/jobs/"), std::nullopt);
  EXPECT_EQ(job::PathBelow("/state/jobs", "/state/jobsx/12/results.json"), std::nullopt);
  EXPECT_EQ(job::PathBelow("/state/jobs", "/state/jobs/../verdicts/12.json"), std::nullopt);
  EXPECT_EQ(job::PathBelow("/state/jobs", "/tmp/results.json"), std::nullopt);
  // A relative path is taken against the current folder.
  const std::string cwd = fs::current_path().string();
  EXPECT_EQ(job::PathBelow(cwd, "a/results.json"), "a/results.json");
}

}  // namespace
}  // namespace pilot
