#include "core/base/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <utility>

namespace pilot {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// A pipe's two ends; the test owns both until it hands one over.
struct Pipe {
  int read = -1;
  int write = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read = fds[0];
    write = fds[1];
  }
};

TEST(UniqueFd, ClosesWhatItHoldsWhenItGoes) {
  Pipe p;
  {
    const UniqueFd fd(p.read);
    EXPECT_EQ(fd.get(), p.read);
    EXPECT_TRUE(IsOpen(p.read));
  }
  EXPECT_FALSE(IsOpen(p.read));
  ::close(p.write);
}

TEST(UniqueFd, HoldsNothingByDefault) {
  UniqueFd fd;
  EXPECT_EQ(fd.get(), -1);
  fd.reset();
  EXPECT_EQ(fd.get(), -1);
}

TEST(UniqueFd, ResetClosesTheOldOne) {
  Pipe p;
  UniqueFd fd(p.read);
  fd.reset(p.write);
  EXPECT_FALSE(IsOpen(p.read));
  EXPECT_EQ(fd.get(), p.write);
  fd.reset();
  EXPECT_FALSE(IsOpen(p.write));
  EXPECT_EQ(fd.get(), -1);
}

TEST(UniqueFd, ReleaseGivesItUpOpen) {
  Pipe p;
  int released = -1;
  {
    UniqueFd fd(p.read);
    released = fd.release();
    EXPECT_EQ(fd.get(), -1);
  }
  EXPECT_EQ(released, p.read);
  EXPECT_TRUE(IsOpen(p.read));
  ::close(p.read);
  ::close(p.write);
}

TEST(UniqueFd, MovesHandItOver) {
  Pipe p;
  UniqueFd a(p.read);
  UniqueFd b(std::move(a));
  EXPECT_EQ(a.get(), -1);  // NOLINT(bugprone-use-after-move): moved-from holds none
  EXPECT_EQ(b.get(), p.read);
  UniqueFd c(p.write);
  c = std::move(b);
  EXPECT_FALSE(IsOpen(p.write));
  EXPECT_EQ(c.get(), p.read);
  EXPECT_TRUE(IsOpen(p.read));
}

}  // namespace
}  // namespace pilot
