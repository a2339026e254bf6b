#include "core/base/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

using testutil::ReadText;
using testutil::TempDir;
using testutil::WriteText;

// Real file operations with one injected failure: the `fail_op` operation
// fails; "partial_write" writes half the bytes, then fails (like ENOSPC).
class FaultyFileOps : public FileOps {
 public:
  explicit FaultyFileOps(std::string fail_op) : fail_op_(std::move(fail_op)) {}
  Result<int> CreateExclusive(const std::string& path, mode_t mode) override {
    if (fail_op_ == "create") return Status::IoError(path, "injected create failure");
    return real_.CreateExclusive(path, mode);
  }
  Status Write(int fd, std::string_view data) override {
    if (fail_op_ == "write") return Status::IoError("write", "injected write failure");
    if (fail_op_ == "partial_write") {
      real_.Write(fd, data.substr(0, data.size() / 2));
      return Status::IoError("write", "No space left on device");
    }
    return real_.Write(fd, data);
  }
  Status Sync(int fd) override {
    if (fail_op_ == "sync") return Status::IoError("fsync", "injected fsync failure");
    return real_.Sync(fd);
  }
  Status Close(int fd) override {
    Status s = real_.Close(fd);
    if (fail_op_ == "close") return Status::IoError("close", "injected close failure");
    return s;
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (fail_op_ == "rename") return Status::IoError(to, "injected rename failure");
    return real_.Rename(from, to);
  }
  Status SyncDir(const std::string& dir) override {
    if (fail_op_ == "syncdir") return Status::IoError(dir, "injected directory fsync failure");
    return real_.SyncDir(dir);
  }
  Status Remove(const std::string& path) override { return real_.Remove(path); }

 private:
  std::string fail_op_;
  FileOps& real_ = RealFileOps();
};

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

TEST(AtomicFile, WritesNewFileWithMode) {
  TempDir dir;
  const std::string path = dir / "lock.json";
  ASSERT_TRUE(WriteFileAtomic(path, "hello", 0640).ok());
  EXPECT_EQ(ReadText(path), "hello");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // exact, whatever the umask
  ASSERT_TRUE(WriteFileAtomic(path, "world", 0600).ok());
  EXPECT_EQ(ReadText(path), "world");
  EXPECT_EQ(Entries(dir.path()), std::vector<std::string>{"lock.json"});
}

TEST(AtomicFile, MissingDirectory) {
  TempDir dir;
  Status s = WriteFileAtomic(dir / "no/such/file", "x");
  EXPECT_EQ(s.code(), Code::kNotFound);
}

struct FaultCase {
  std::string op;
  bool expect_error;
  bool expect_new;  // the new contents are in place afterwards
};

// A failure at any step leaves the old file or the new one, never a
// partial one, and never a temporary file.
TEST(AtomicFile, FailureAtAnyStepLeavesOldOrNew) {
  const std::string old_text(10000, 'o');
  const std::string new_text(20000, 'n');
  const FaultCase cases[] = {
      {"none", false, true},
      {"create", true, false},
      {"write", true, false},
      {"partial_write", true, false},
      {"sync", true, false},
      {"close", true, false},
      {"rename", true, false},
      // The rename happened; only its durability is in doubt: report it.
      {"syncdir", true, true},
  };
  for (const auto& c : cases) {
    for (bool had_old : {true, false}) {
      TempDir dir;
      const std::string path = dir / "verdict.json";
      if (had_old) WriteText(path, old_text);
      FaultyFileOps fs(c.op);
      Status s = WriteFileAtomic(path, new_text, 0644, fs);
      EXPECT_EQ(!s.ok(), c.expect_error) << c.op << ": " << s.ToString();
      if (c.expect_new) {
        EXPECT_EQ(ReadText(path), new_text) << c.op;
      } else if (had_old) {
        EXPECT_EQ(ReadText(path), old_text) << c.op;
      } else {
        EXPECT_FALSE(std::filesystem::exists(path)) << c.op;
      }
      auto entries = Entries(dir.path());
      EXPECT_EQ(entries.size(), (had_old || c.expect_new) ? 1u : 0u)
          << c.op << ": temporary file left behind";
    }
  }
}

TEST(AtomicFile, ErrorNamesTargetAndCause) {
  TempDir dir;
  FaultyFileOps fs("partial_write");
  Status s = WriteFileAtomic(dir / "v.json", "abcdef", 0644, fs);
  EXPECT_EQ(s.ToString(), "pilot: " + (dir / "v.json") + ": write: No space left on device");
}

TEST(ReadFileLimited, LimitsAndErrors) {
  TempDir dir;
  WriteText(dir / "small", "12345");
  EXPECT_EQ(ReadFileLimited(dir / "small", 5).value(), "12345");
  auto big = ReadFileLimited(dir / "small", 4);
  EXPECT_EQ(big.status().code(), Code::kInvalid);
  EXPECT_EQ(big.status().ToString(), "pilot: " + (dir / "small") + ": larger than 4 bytes");
  EXPECT_EQ(ReadFileLimited(dir / "none", 10).status().code(), Code::kNotFound);
  EXPECT_EQ(ReadFileLimited(dir.path(), 10).status().ToString(),
            "pilot: " + dir.path() + ": not a regular file");
  // A FIFO planted in place of a file must not hang the reader.
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadFileLimited(dir / "fifo", 10).status().code(), Code::kIoError);
}

TEST(Paths, DirAndBaseName) {
  EXPECT_EQ(DirName("a/b/c"), "a/b");
  EXPECT_EQ(DirName("c"), ".");
  EXPECT_EQ(DirName("/c"), "/");
  EXPECT_EQ(BaseName("a/b/c"), "c");
  EXPECT_EQ(BaseName("c"), "c");
}

}  // namespace
}  // namespace pilot
