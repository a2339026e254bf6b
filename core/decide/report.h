// The pilot report: one self-contained HTML page (inline CSS and SVG, no
// scripts, no external resources) with the verdict, the measurements and
// plots: memory at the measured steps (allocated, reserved, device; fresh
// vs resumed), loss and step time per step (metrics.jsonl), the step-time
// breakdown (data wait, forward+backward, optimizer, other, checkpoint
// amortised, projected communication), hardware fit bars and the budget.
//
// SVG ids (stable, tested): memory-steps, memory-split, loss-steps,
// time-steps, time-breakdown, hardware-fit, budget.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/plan.h"
#include "core/records/results.h"
#include "core/records/verdict.h"

namespace pilot {

// One line of metrics.jsonl (the runner's per-step record).
struct MetricRow {
  std::string process;  // "reference" | "resumed" | ...
  int64_t step = 0;
  double loss = 0;  // NaN when not recorded
  double step_ms = 0;
  double data_wait_ms = 0;
  double forward_backward_ms = 0;
  double optimizer_ms = 0;
  bool timed = false;
};

inline constexpr size_t kMaxMetricRows = 200000;

// Lines that are not JSON objects with a numeric "step" are skipped and
// counted in *skipped; at most kMaxMetricRows rows are kept.
std::vector<MetricRow> ParseMetricsJsonl(std::string_view text, size_t* skipped);

struct ReportInput {
  std::string label;         // "job 4242" or a path
  std::string generated_at;  // RFC 3339
  Results results;
  const Verdict* verdict = nullptr;  // optional
  const Plan* plan = nullptr;        // optional (needs the config)
  const Policy* policy = nullptr;    // the plan's policy (nullptr: defaults)
  std::string plan_error;            // why there is no plan
  std::vector<MetricRow> metrics;
  int64_t checkpoint_interval = 0;  // run.checkpoint_interval (0 = unknown)
};

std::string RenderReportHtml(const ReportInput& in);

}  // namespace pilot
