#include "supervisor/program/phase_usage.h"

#include <algorithm>
#include <map>
#include <optional>

#include "supervisor/program/proc_tree.h"

namespace pilot::supervisor {

void PhaseUsage::Sample(const std::set<pid_t>& running, bool all_reaped, GroupResult* out) {
  const Clock::time_point now = Clock::now();
  if (std::chrono::duration<double>(now - last_).count() < kSampleSeconds && !all_reaped) return;
  last_ = now;
  const GroupUsage u = UsageOfGroups(running);
  out->peak_rss_bytes = std::max(out->peak_rss_bytes, u.rss_bytes);
  if (!all_reaped) cpu_samples_.emplace_back(std::chrono::duration<double>(now - t0_).count(), u.cpu_seconds);
}

void PhaseUsage::MeasureBusy(GroupResult* out) const {
  if (out->records.size() < 2) return;
  const double from = out->records.front().arrived, to = out->records.back().arrived;
  const std::pair<double, double>* a = nullptr;
  const std::pair<double, double>* b = nullptr;
  for (const auto& s : cpu_samples_) {
    if (s.first < from || s.first > to) continue;
    if (a == nullptr) a = &s;
    b = &s;
  }
  if (a == nullptr || b->first - a->first < 2.0) return;
  // The window in steps: its length over the mean time between the first
  // records of consecutive steps (exact where counting the records inside
  // it would be off by up to one step).
  std::map<int64_t, double> first_of_step;
  for (const MetricRecord& r : out->records) first_of_step.emplace(r.step, r.arrived);
  if (first_of_step.size() >= 2) {
    const double span = first_of_step.rbegin()->second - first_of_step.begin()->second;
    const double period = span / static_cast<double>(first_of_step.size() - 1);
    if (period > 0) out->busy_steps = (b->first - a->first) / period;
  }
  out->busy_window_seconds = b->first - a->first;
  out->busy_cpu_seconds = std::max(0.0, b->second - a->second);
  out->busy_from = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a->first));
  out->busy_to = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(b->first));
}

void PhaseUsage::MarkRecords(const std::set<pid_t>& running, const std::vector<int64_t>& steps,
                             size_t* seen, GroupResult* out) {
  std::optional<double> cpu;  // one read for every record of this round
  for (; *seen < out->records.size(); ++*seen) {
    const MetricRecord& r = out->records[*seen];
    const bool wanted = *seen == 0 ||
                        (std::find(steps.begin(), steps.end(), r.step) != steps.end() &&
                         std::none_of(out->cpu_marks.begin(), out->cpu_marks.end(),
                                      [&](const CpuMark& m) { return m.step == r.step; }));
    if (!wanted) continue;
    if (!cpu) cpu = UsageOfGroups(running).cpu_seconds;
    out->cpu_marks.push_back(CpuMark{r.step, r.arrived, *cpu});
  }
}

}  // namespace pilot::supervisor
