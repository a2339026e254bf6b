// job/task_channel.h: the descriptors a task hands its supervisor (or, in a
// container task, its stdio and its environment) and the exit status back.
#include "job/task_channel.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace pilot::job {
namespace {

bool SameFile(int a, int b) {
  struct stat x {};
  struct stat y {};
  return ::fstat(a, &x) == 0 && ::fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

class TaskChannelTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair_), 0); }
  void TearDown() override {
    ::close(pair_[0]);
    ::close(pair_[1]);
  }
  int pair_[2] = {-1, -1};
};

TEST_F(TaskChannelTest, StdioAndEnvironmentArriveAsTheSameFiles) {
  const int env = ::memfd_create("env", 0);
  ASSERT_GE(env, 0);
  const std::string text = std::string("RANK=2") + '\0' + "PATH=/bin" + '\0';
  ASSERT_EQ(::write(env, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ASSERT_TRUE(SendStdioAndEnv(pair_[0], env).ok());
  Result<std::array<int, 4>> got = ReceiveStdioAndEnv(pair_[1]);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(SameFile((*got)[static_cast<size_t>(i)], i));
  EXPECT_TRUE(SameFile((*got)[3], env));
  char buf[64] = {};
  EXPECT_EQ(::pread((*got)[3], buf, sizeof(buf), 0), static_cast<ssize_t>(text.size()));
  EXPECT_EQ(std::string(buf, text.size()), text);
  for (int fd : *got) ::close(fd);
  ::close(env);

  ASSERT_TRUE(SendExitStatus(pair_[1], 3).ok());
  EXPECT_EQ(ReceiveExitStatus(pair_[0]), 3);
}

TEST_F(TaskChannelTest, TheOtherMessageIsRefused) {
  ASSERT_TRUE(SendStdio(pair_[0]).ok());
  Result<std::array<int, 4>> got = ReceiveStdioAndEnv(pair_[1]);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().Message().find("not the descriptors expected"), std::string::npos)
      << got.status().Message();
  ::shutdown(pair_[0], SHUT_WR);
  EXPECT_FALSE(ReceiveStdio(pair_[1]).ok());
}

}  // namespace
}  // namespace pilot::job
