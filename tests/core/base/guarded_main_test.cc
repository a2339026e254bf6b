// core/base/guarded_main.h: an exception that escapes a main becomes one
// line and the program's own exit status.
#include "core/base/guarded_main.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace pilot {
namespace {

TEST(GuardedMain, ReturnsTheBodysStatus) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(GuardedMain("prolog", 0, [] { return 3; }), 3);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(GuardedMain, AnExceptionIsOneLineAndTheCrashStatus) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(GuardedMain("epilog", 0, []() -> int { throw std::runtime_error("boom"); }), 0);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "pilot: epilog: internal error: boom\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(GuardedMain("", 4, []() -> int { throw 7; }), 4);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "pilot: internal error: unknown exception\n");
}

}  // namespace
}  // namespace pilot
