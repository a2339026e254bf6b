#include "core/decide/memory_growth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/base/strings.h"
#include "core/decide/checks.h"

namespace pilot {
namespace {

constexpr double kNoiseBytes = 16.0 * 1024 * 1024;
constexpr double kNoiseFraction = 0.01;
constexpr double kSteadyFraction = 0.6;  // of the changes, those that grew
constexpr size_t kMaxPoints = 512;       // pairs grow with the square

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) {
    m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  }
  return m;
}

struct Capacity {
  int64_t bytes = 0;
  std::string what;  // "H200-141's memory", "the job's memory"
};

Capacity CapacityOf(const GrowthEstimate& g, const Results& r, const Config& cfg, const HardwareCatalog& cat) {
  Capacity c;
  if (g.series == "host") {
    if (r.program && r.program->memory_limit_bytes > 0) {
      c.bytes = r.program->memory_limit_bytes;
      c.what = "the job's memory";
    }
    return c;
  }
  if (!cfg.run.gpu_type.empty()) {
    if (const GpuType* t = cat.Find(cfg.run.gpu_type)) {
      c.bytes = t->memory_bytes;
      c.what = t->name + "'s memory";
      return c;
    }
  }
  if (r.single && r.single->memory.device_total_bytes) {
    c.bytes = *r.single->memory.device_total_bytes;
    c.what = "the device's memory";
  }
  return c;
}

}  // namespace

std::optional<GrowthEstimate> EstimateGrowth(const std::vector<StepMemory>& steps, bool device,
                                             int64_t warmup_steps) {
  std::vector<std::pair<double, double>> pts;
  for (const StepMemory& m : steps) {
    const int64_t v = device ? m.peak_allocated_bytes : m.peak_rss_bytes;
    if (m.step > std::max<int64_t>(warmup_steps, 0) + 1 && v >= 0) {
      pts.emplace_back(static_cast<double>(m.step), static_cast<double>(v));
    }
  }
  if (pts.size() < 4) return std::nullopt;
  GrowthEstimate g;
  g.series = device ? "device" : "host";
  g.from_step = static_cast<int64_t>(pts.front().first);
  g.to_step = static_cast<int64_t>(pts.back().first);
  g.points = static_cast<int>(pts.size());
  g.last_bytes = static_cast<int64_t>(pts.back().second);
  int rising = 0;
  for (size_t i = 1; i < pts.size(); ++i) rising += pts[i].second > pts[i - 1].second ? 1 : 0;
  g.rising_fraction = static_cast<double>(rising) / static_cast<double>(pts.size() - 1);
  // Every pair of an evenly thinned series: the median slope.
  const size_t stride = (pts.size() + kMaxPoints - 1) / kMaxPoints;
  std::vector<std::pair<double, double>> thin;
  for (size_t i = 0; i < pts.size(); i += stride) thin.push_back(pts[i]);
  std::vector<double> slopes;
  for (size_t i = 0; i < thin.size(); ++i) {
    for (size_t j = i + 1; j < thin.size(); ++j) {
      slopes.push_back((thin[j].second - thin[i].second) / (thin[j].first - thin[i].first));
    }
  }
  g.bytes_per_step = Median(std::move(slopes));
  std::vector<double> levels;
  for (const auto& p : pts) levels.push_back(p.second);
  const double level = Median(levels);
  const double over_window = g.bytes_per_step * static_cast<double>(g.to_step - g.from_step);
  g.grows = g.bytes_per_step > 0 && g.rising_fraction >= kSteadyFraction &&
            over_window > std::max(kNoiseBytes, kNoiseFraction * level);
  return g;
}

Check MemoryGrowthCheck(const Results& r, const Config& cfg, const HardwareCatalog& cat) {
  Check c;
  c.name = std::string(CheckName("memory_growth"));
  c.verified_by = VerifiedBy::kWorkload;
  // Without either key (a config the loader would refuse) the length is unknown.
  const int64_t run_steps =
      cfg.run.target_steps > 0 || cfg.run.target_tokens > 0 ? cfg.RunTotalSteps() : 0;
  c.threshold = run_steps > 0 ? "fits at the run's step " + std::to_string(run_steps) : "no growth";
  if (!r.program || !r.single) {
    c.status = CheckStatus::kSkip;
    c.measured = "no per-step series";
    c.detail = "only a user's program reports every step's memory";
    return c;
  }
  std::vector<GrowthEstimate> found;
  for (bool device : {true, false}) {
    if (auto g = EstimateGrowth(r.program->memory_steps, device, r.single->warmup_steps)) found.push_back(*g);
  }
  if (found.empty()) {
    c.status = CheckStatus::kSkip;
    c.measured = "not measured";
    c.detail = "fewer than 4 steps past warm-up reported memory figures";
    return c;
  }
  std::vector<std::string> flat, warn, fail;
  for (const GrowthEstimate& g : found) {
    const std::string name = g.series == "device" ? "device memory (allocator peak)" : "resident memory";
    const std::string where = " over steps " + std::to_string(g.from_step) + ".." + std::to_string(g.to_step);
    if (!g.grows) {
      flat.push_back(name + " flat" + where);
      continue;
    }
    const std::string rate =
        name + " grows " + FormatBytes(g.bytes_per_step, ByteUnit::kKiB, 2) + "/step" + where +
        " (" + std::to_string(static_cast<int>(std::lround(g.rising_fraction * 100))) +
        "% of steps grew)";
    const Capacity cap = CapacityOf(g, r, cfg, cat);
    if (run_steps <= 0 || cap.bytes <= 0) {
      warn.push_back(rate + (run_steps <= 0 ? "; the run's length is not known (run.target_steps)"
                                            : "; what it may hold is not known"));
      continue;
    }
    const double at_end = static_cast<double>(g.last_bytes) +
                          g.bytes_per_step * static_cast<double>(std::max<int64_t>(0, run_steps - g.to_step));
    if (at_end <= static_cast<double>(cap.bytes)) {
      warn.push_back(rate + "; at that rate step " + std::to_string(run_steps) + " holds " +
                     FormatGiB(static_cast<int64_t>(at_end)) + " of " + cap.what + " " + FormatGiB(cap.bytes));
      continue;
    }
    const double room = static_cast<double>(cap.bytes - g.last_bytes);
    const int64_t oom_step = g.to_step + static_cast<int64_t>(std::max(0.0, room) / g.bytes_per_step);
    fail.push_back(rate + "; at that rate " + cap.what + " (" + FormatGiB(cap.bytes) +
                   ") is exhausted near step " + std::to_string(oom_step) + " of the run's " +
                   std::to_string(run_steps));
  }
  c.status = !fail.empty() ? CheckStatus::kFail : !warn.empty() ? CheckStatus::kWarn : CheckStatus::kPass;
  const std::vector<std::string>& lead = !fail.empty() ? fail : !warn.empty() ? warn : flat;
  c.measured = lead.front().substr(0, lead.front().find(';'));
  std::vector<std::string> all = fail;
  all.insert(all.end(), warn.begin(), warn.end());
  all.insert(all.end(), flat.begin(), flat.end());
  c.detail = Join(all, "; ");
  return c;
}

}  // namespace pilot
