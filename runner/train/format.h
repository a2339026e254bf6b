// Small formatting helpers shared by the stages' reports and progress lines.
//
// Thread-safety: pure functions (NowRfc3339 reads the clock).
#pragma once

#include <string>

namespace pilot::runner {

std::string NowRfc3339();
double RelDiff(double a, double b);  // |a - b| / max(|b|, 1e-12)

}  // namespace pilot::runner
