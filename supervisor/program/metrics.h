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
// A metric the program reports that should reach results, verdict and
// report touches, in this order:
//   1. python/slurm_pilot/_report.py: step() writes it into the record
//      (from an argument, or measured like _cuda_fields and _model_fields
//      do), and its name joins CORE_FIELDS, so that a too long line never
//      drops it; tests/program/test_probe.py checks the record.
//   2. Here: a member of MetricRecord and its row in kIntFields or
//      kNumFields (metrics.cc), which alone read the optional fields and
//      make MetricFieldNames; a wrong type is ignored, never an error.
//      tests/supervisor/program_metrics_test.cc parses a line with it.
//   3. pilot-program(7), METRICS RECORD: a .TP tag with its name
//      (tests/supervisor/program_doc_test.cc checks that every name
//      MetricFieldNames gives has one).
//   4. Its place in results.json: a member of the stage's struct
//      (core/records/results.h, or results_node.h for stages.node) and its
//      one line in that struct's Fields (core/records/results.cc), with
//      kMayBeAbsent so that files written before it still read; a memory
//      figure is a member and line of MemoryFigures instead
//      (core/records/memory_figures.h, which says how) and, for the probe's
//      own spelling, MemoryFiguresOf below.
//   5. Filling it from the records: the single stage in SingleFromRecords
//      (judge.cc: the reference's steps; FirstStepMemory for the resumed
//      process), the node stage's ranks in NoteNodeReference and
//      NoteNodeResumed (phase_outcome.cc: each rank's NodeRankStats,
//      beside NodeMemoryOf);
//      tests/supervisor/program_judge_test.cc and
//      tests/supervisor/program/program_pilot_test.cc.
//   6. pilot-files(5), RESULTS.JSON: its line under its stage (the man-page
//      test, tests/core/records/results_test.cc, checks every ResultsKeys
//      key), and docs/formats.md's results.json section.
//   7. The verdict: a check in core/decide/decide.cc (a Check* function
//      called from Decide, VerifiedBy::kWorkload: only the program vouches
//      for its figures), a threshold in the site policy when it has one
//      (core/records/policy.h, pilot.conf(5)); tests/core/decide/.
//   8. The report: its row or plot in core/decide/report.cc (the single
//      stage's table, or the node stage's); tests/report/ renders it.
//
// Thread-safety: pure functions; LineBuffer is a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/config/loss_pattern.h"
#include "core/records/memory_figures.h"
#include "core/records/results.h"

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
  // The precision the probe saw (pilot-program(7)): an autocast region's
  // dtype and device since the previous record, the parameters' dtype, a
  // gradient scaler at work; "" / nullopt when not reported.
  std::string autocast, autocast_device, param_dtype;
  std::optional<bool> grad_scaler;
  double arrived = 0;  // seconds since the phase started, the supervisor's clock
};

// One line (without its newline). Errors: kInvalid saying what is wrong.
Result<MetricRecord> ParseMetricLine(std::string_view line);

// The probe's other lines: objects with a "kind" (pilot-program(7), THE
// PROBE'S OTHER LINES). "env": what the process runs with, once.
struct EnvLine {
  std::optional<int> rank;
  ProgramEnvironment env;
};
// "state": the training state's fingerprint when the program saved step K
// (when = "saved") or had restored it ("restored"): per component its
// digest and what the probe added in clear ("last_epoch 20"), or the
// probe's error fingerprinting it.
struct StateComponent {
  std::string digest;   // "" when the probe could not take it
  std::string detail;   // one line, at most 160 bytes
};
struct StateLine {
  std::optional<int> rank;
  std::string when;     // "saved" | "restored"
  int64_t step = 0;
  std::map<std::string, StateComponent> components;
};
// "packages": installed distributions and loaded native extensions, in as
// many lines as the distributions need (ProgramEnvironment). Entries whose
// name or version does not read as one are left out.
struct PackagesLine {
  std::optional<int> rank;
  std::map<std::string, std::string> distributions, extensions;
};
inline constexpr size_t kMaxDistributions = 4000;  // per process, as the probe's bound
inline constexpr size_t kMaxExtensions = 200;
// A line is a step record, or one of these (a "kind" the reader does not
// know is kInvalid, as a bad record is).
struct ProbeLine {
  std::optional<MetricRecord> record;
  std::optional<EnvLine> env;
  std::optional<StateLine> state;
  std::optional<PackagesLine> packages;
};
Result<ProbeLine> ParseProbeLine(std::string_view line);

// The record's memory figures as results.json holds them: the record's
// device ("" when it named none), device_used_bytes from device_total_bytes
// less device_free_bytes when it reported both, peak_rss_bytes as the
// process's peak resident set.
MemoryFigures MemoryFiguresOf(const MetricRecord& r);

// Every field ParseMetricLine reads, required ones first (pilot-program(7)
// documents each; a test checks it).
const std::vector<std::string>& MetricFieldNames();

// The loss in `line` when `pattern` matches it (an unanchored search, RE2's
// syntax: pilot-program(7)) and its one group reads whole as a number
// (strtod's syntax; nan, -nan, inf and infinity in any case). A line of
// kMaxLossLine bytes or more is not matched at all: the protocol's lines
// are shorter (pilot-program(7)), and a prefix of a longer one could hold a
// number cut short. Time linear in the line (LossPattern).
inline constexpr size_t kMaxLossLine = 4096;
std::optional<double> MatchLoss(const LossPattern& pattern, std::string_view line);

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
