// The records a user's program writes to PILOT_METRICS (pilot-program(7)),
// and the lines of its standard output when [program] loss_pattern stands
// in for them.
//
// A record is one JSON object per line: "step" (an integer >= 1) and
// "loss" (a number) are required; the optional fields below are read when
// they have the right type and ignored otherwise; unknown fields are kept
// out of the way, never errors. Python's json module writes a non-finite
// loss as the bare token NaN or Infinity: those are accepted and read as a
// non-finite loss.
//
// Thread-safety: pure functions; LineBuffer is a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/records/memory_figures.h"

namespace pilot::supervisor {

inline constexpr size_t kMaxMetricLine = 64 * 1024;

struct MetricRecord {
  int64_t step = 0;
  double loss = 0;          // NaN or +-inf when the program reported one
  std::optional<int> rank;  // as reported; the reader fills the process's rank when absent
  std::optional<int64_t> tokens, seq_len, micro_batch;
  std::optional<double> lr, grad_norm, eval_loss, data_wait_ms, step_ms, probe_ms;
  std::string device;
  std::optional<int64_t> peak_allocated_bytes, peak_reserved_bytes, device_free_bytes,
      device_total_bytes, alloc_retries, ooms, peak_rss_bytes, params, param_bytes, grad_bytes,
      optimizer_state_bytes;
  double arrived = 0;  // seconds since the phase started, the supervisor's clock
};

// One line (without its newline). Errors: kInvalid saying what is wrong.
Result<MetricRecord> ParseMetricLine(std::string_view line);

// The record's memory figures as results.json holds them: the record's
// device ("" when it named none), device_used_bytes from device_total_bytes
// less device_free_bytes when it reported both, peak_rss_bytes as the
// process's peak resident set.
MemoryFigures MemoryFiguresOf(const MetricRecord& r);

// Every field ParseMetricLine reads, required ones first (pilot-program(7)
// documents each; a test checks it).
const std::vector<std::string>& MetricFieldNames();

// The loss in `line` when `pattern` (one group) matches it and the group
// reads as a number. Only the line's first kMaxLossLine bytes are matched:
// std::regex recurses once per character it consumes, and a program's long
// line (tens of KB) would overflow the supervisor's stack.
inline constexpr size_t kMaxLossLine = 1024;
std::optional<double> MatchLoss(const std::regex& pattern, std::string_view line);

// Bytes in, complete lines out; a line longer than kMaxMetricLine is cut
// off and counted, never kept whole.
class LineBuffer {
 public:
  void Append(const char* data, size_t n);
  // The next complete line, without '\n'.
  std::optional<std::string> Next();
  // What is left when the writer is gone (a last line without '\n').
  std::optional<std::string> Rest();
  int64_t overlong() const { return overlong_; }

 private:
  std::string buf_;
  size_t start_ = 0;  // where the next line to hand out starts
  size_t line_ = 0;   // where the line being appended to starts (after the last '\n')
  bool skipping_ = false;
  int64_t overlong_ = 0;
};

}  // namespace pilot::supervisor
