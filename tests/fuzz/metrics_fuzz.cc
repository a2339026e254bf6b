// Program mode's records (supervisor/program/metrics.h): the bytes a
// program writes to its FIFO through LineBuffer (cut where the input's
// first byte says), each line through ParseMetricLine and through MatchLoss
// with the documented loss_pattern.
#include "supervisor/program/metrics.h"
#include "tests/fuzz/fuzz_util.h"

using pilot::supervisor::kMaxMetricLine;

namespace {

void Line(const std::string& line, const pilot::LossPattern& pattern) {
  pilot::fuzz::Require(line.size() <= kMaxMetricLine, "a line over kMaxMetricLine");
  pilot::fuzz::Require(line.find('\n') == std::string::npos, "a line holds a newline");
  (void)pilot::supervisor::ParseMetricLine(line);
  (void)pilot::supervisor::MatchLoss(pattern, line);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pilot::LossPattern kPattern("loss[=:] *([0-9.eE+-]+)");
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const char* p = reinterpret_cast<const char*>(data) + 1;
  size_t left = size - 1;
  pilot::supervisor::LineBuffer buf;
  while (left > 0) {
    const size_t n = left < chunk ? left : chunk;
    buf.Append(p, n);
    p += n;
    left -= n;
    while (auto line = buf.Next()) Line(*line, kPattern);
  }
  if (auto rest = buf.Rest()) Line(*rest, kPattern);
  return 0;
}
