// Formatting helpers of the reports.
#include "runner/train/format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>

#include "core/base/rfc3339.h"

namespace pilot::runner {

std::string NowRfc3339() { return FormatRfc3339(static_cast<int64_t>(std::time(nullptr))); }

double RelDiff(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

}  // namespace pilot::runner
