#include "core/base/rfc3339.h"

#include <gtest/gtest.h>

namespace pilot {
namespace {

TEST(Rfc3339, FormatKnownTimes) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(951782400), "2000-02-29T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(1796011506), "2026-11-30T04:05:06Z");
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59Z");
}

TEST(Rfc3339, ParseRoundTripAndOffsets) {
  for (int64_t t : {int64_t{0}, int64_t{951782400}, int64_t{1796011506}, int64_t{4102444799}}) {
    EXPECT_EQ(ParseRfc3339(FormatRfc3339(t)).value(), t);
  }
  EXPECT_EQ(ParseRfc3339("2026-11-30T06:05:06+02:00").value(), 1796011506);
  EXPECT_EQ(ParseRfc3339("2026-11-30T04:05:06.123Z").value(), 1796011506);
  EXPECT_EQ(ParseRfc3339("2026-11-30t04:05:06z").value(), 1796011506);
}

TEST(Rfc3339, RejectsMalformed) {
  for (const char* bad : {"", "2026-11-30", "2026-11-30T04:05:06", "2026-13-01T00:00:00Z",
                          "2026-11-31T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T04:05:06Zx",
                          "2026-11-30T04:05:06+2:00", "x026-11-30T04:05:06Z"}) {
    auto r = ParseRfc3339(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalid);
    }
  }
}

}  // namespace
}  // namespace pilot
