// Formatting helpers of the reports.
#include "runner/train/format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>

#include "core/base/rfc3339.h"

namespace pilot::runner {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string NowRfc3339() { return FormatRfc3339(static_cast<int64_t>(std::time(nullptr))); }

double RelDiff(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

std::string FormatBytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return Fixed(bytes / (1024.0 * 1024 * 1024), 1) + " GiB";
  return Fixed(bytes / (1024.0 * 1024), 1) + " MiB";
}

}  // namespace pilot::runner
