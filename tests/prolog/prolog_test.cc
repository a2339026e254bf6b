// The prolog's pure parts: the seed a job gets when its config leaves it
// open.
#include "prolog/prolog.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace pilot {
namespace {

TEST(Prolog, SeedFromJobId) {
  EXPECT_EQ(prolog::SeedFromJobId(42), prolog::SeedFromJobId(42));
  EXPECT_NE(prolog::SeedFromJobId(42), prolog::SeedFromJobId(43));
  for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{4242}, int64_t{4294967295}}) {
    int64_t s = prolog::SeedFromJobId(id);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, int64_t{1} << 31);
  }
}

}  // namespace
}  // namespace pilot
