// The memory_growth check (core/decide/memory_growth.h): a leak found in the
// pilot's steady steps and carried to the long run's length, and none in
// the series of clean programs: flat, noisy, a single jump at an
// evaluation or the save, warm-up growth. What no other test proves: that a
// leak that fits the pilot but not the run is a NO-GO before it is reserved.
#include "core/decide/memory_growth.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace pilot {
namespace {

constexpr int64_t kMiBMemoryGrowth = 1024 * 1024;
constexpr int64_t kGiBMemoryGrowth = 1024 * kMiBMemoryGrowth;

// `n` steps: `base` plus `per_step` a step, plus `shape(step)`.
std::vector<StepMemory> Series(int n, int64_t base, int64_t per_step, bool device,
                               int64_t (*shape)(int64_t) = nullptr) {
  std::vector<StepMemory> out;
  for (int64_t s = 1; s <= n; ++s) {
    StepMemory m;
    m.step = s;
    const int64_t v = base + per_step * s + (shape ? shape(s) : 0);
    (device ? m.peak_allocated_bytes : m.peak_rss_bytes) = v;
    out.push_back(m);
  }
  return out;
}

Results ProgramResults(std::vector<StepMemory> steps, int64_t device_total = 0) {
  Results r;
  r.workload = "program";
  SingleStage s;
  s.device = device_total > 0 ? "cuda" : "cpu";
  s.warmup_steps = 2;
  if (device_total > 0) s.memory.device_total_bytes = device_total;
  r.single = s;
  ProgramInfo p;
  p.memory_steps = std::move(steps);
  p.memory_limit_bytes = 16 * kGiBMemoryGrowth;
  r.program = p;
  return r;
}

Config RunOf(int64_t target_steps) {
  Config c;
  c.run.target_steps = target_steps;
  return c;
}

TEST(MemoryGrowth, ALeakThatTheRunCannotHoldFails) {
  // 1.2 GiB more device memory each step: at step 600 the H200's 141 GB is long gone.
  const Results r = ProgramResults(Series(40, 30 * kGiBMemoryGrowth, 1229 * kMiBMemoryGrowth, true), 140 * kGiBMemoryGrowth);
  const Check c = MemoryGrowthCheck(r, RunOf(600), HardwareCatalog{});
  EXPECT_EQ(c.status, CheckStatus::kFail) << c.detail;
  EXPECT_NE(c.measured.find("device memory (allocator peak) grows 1.20 GiB/step over steps 4..40"),
            std::string::npos)
      << c.measured;
  // 140 GiB - (30 GiB + 40 x 1.2 GiB) = 62 GiB left: about 51 more steps.
  EXPECT_NE(c.detail.find("exhausted near step 91 of the run's 600"), std::string::npos) << c.detail;
}

TEST(MemoryGrowth, AResidentLeakOnTheCpuIsMeasuredAgainstTheJobsMemory) {
  const Results r = ProgramResults(Series(16, 500 * kMiBMemoryGrowth, 8 * kMiBMemoryGrowth, false));
  const Check c = MemoryGrowthCheck(r, RunOf(100000), HardwareCatalog{});
  EXPECT_EQ(c.status, CheckStatus::kFail) << c.detail;
  EXPECT_NE(c.detail.find("resident memory grows 8.0 MiB/step"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("the job's memory (16.0 GiB)"), std::string::npos) << c.detail;
}

TEST(MemoryGrowth, GrowthThatFitsTheRunWarns) {
  const Results r = ProgramResults(Series(16, 500 * kMiBMemoryGrowth, 8 * kMiBMemoryGrowth, false));
  const Check c = MemoryGrowthCheck(r, RunOf(200), HardwareCatalog{});
  EXPECT_EQ(c.status, CheckStatus::kWarn) << c.detail;
  EXPECT_NE(c.detail.find("at that rate step 200 holds 2.1 GiB of the job's memory 16.0 GiB"),
            std::string::npos)
      << c.detail;
  // Without the run's length the growth is named, never passed.
  const Check u = MemoryGrowthCheck(r, RunOf(0), HardwareCatalog{});
  EXPECT_EQ(u.status, CheckStatus::kWarn);
  EXPECT_NE(u.detail.find("run.target_steps"), std::string::npos) << u.detail;
}

TEST(MemoryGrowth, CleanSeriesPass) {
  const Config run = RunOf(1000000);
  // Flat to the byte, as a fixed-shape step on a GPU is.
  EXPECT_EQ(MemoryGrowthCheck(ProgramResults(Series(20, 9 * kGiBMemoryGrowth, 0, true), 80 * kGiBMemoryGrowth), run, {}).status,
            CheckStatus::kPass);
  // Variable-length batches: up and down by up to 300 MiB, no trend.
  auto noise = [](int64_t s) -> int64_t { return ((s * 7919) % 13 - 6) * 50 * kMiBMemoryGrowth; };
  const Check n = MemoryGrowthCheck(ProgramResults(Series(40, 9 * kGiBMemoryGrowth, 0, true, noise), 80 * kGiBMemoryGrowth), run, {});
  EXPECT_EQ(n.status, CheckStatus::kPass) << n.detail;
  // The resident high-water mark jumps once (the save at step 10, an
  // evaluation) and stays: one rise is not a leak.
  auto jump = [](int64_t s) -> int64_t { return s >= 10 ? 400 * kMiBMemoryGrowth : 0; };
  const Check j = MemoryGrowthCheck(ProgramResults(Series(20, kGiBMemoryGrowth, 0, false, jump)), run, {});
  EXPECT_EQ(j.status, CheckStatus::kPass) << j.detail;
  // Growth only while warming up (steps 1..3: the allocator's cache, the
  // optimizer's lazily made state) is left out.
  auto warm = [](int64_t s) -> int64_t { return std::min<int64_t>(s, 3) * 2 * kGiBMemoryGrowth; };
  const Check w = MemoryGrowthCheck(ProgramResults(Series(20, kGiBMemoryGrowth, 0, true, warm), 80 * kGiBMemoryGrowth), run, {});
  EXPECT_EQ(w.status, CheckStatus::kPass) << w.detail;
  EXPECT_EQ(w.detail, "device memory (allocator peak) flat over steps 4..20");
  // A slow creep under the noise floor (1 MiB over the window) is not a finding.
  const Check s = MemoryGrowthCheck(ProgramResults(Series(20, 4 * kGiBMemoryGrowth, 64 * 1024, true), 80 * kGiBMemoryGrowth), run, {});
  EXPECT_EQ(s.status, CheckStatus::kPass) << s.detail;
}

TEST(MemoryGrowth, SkippedWithoutASeries) {
  Results builtin;
  builtin.single = SingleStage{};
  EXPECT_EQ(MemoryGrowthCheck(builtin, RunOf(100), {}).status, CheckStatus::kSkip);
  const Check few = MemoryGrowthCheck(ProgramResults(Series(4, kGiBMemoryGrowth, kGiBMemoryGrowth, true), 80 * kGiBMemoryGrowth), RunOf(100), {});
  EXPECT_EQ(few.status, CheckStatus::kSkip);
  EXPECT_EQ(few.measured, "not measured");
}

TEST(MemoryGrowth, TheRunsStepsFromItsTokens) {
  Config c;
  c.run.seq_len = 1024;
  c.run.micro_batch = 8;
  c.run.grad_accum = 2;
  c.run.gpus_per_node = 8;
  c.run.nodes = 4;
  c.run.target_tokens = int64_t{1024} * 8 * 2 * 8 * 4 * 1000 + 1;
  EXPECT_EQ(c.RunTotalSteps(), 1001);
  c.run.target_steps = 77;
  EXPECT_EQ(c.RunTotalSteps(), 77);
}

}  // namespace
}  // namespace pilot
