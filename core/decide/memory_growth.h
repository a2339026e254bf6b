// Memory that still grows at the pilot's last steps: the long run's
// out-of-memory, found before it is reserved (kChecks' memory_growth).
//
// The series are the reference process's per-step figures (results.json's
// program.memory_steps): the device allocator's peak of each step on a GPU,
// and the process's resident high-water mark. Warm-up is left out (the
// steps up to training.warmup_steps and one more: the allocator's cache,
// lazily created optimizer state); what remains is growth only when most
// of its steps grew (a single jump, as an evaluation or the save at step K
// makes, is not a leak) and the robust slope (Theil-Sen: the median of the
// slopes between every two steps) carried over the window exceeds noise
// (16 MiB, or 1% of the series' level). The slope is carried to the long
// run's steps (Config::RunTotalSteps) and compared with what the series may
// hold: the wanted GPU's memory (else the device's total the probe reported)
// for the device
// series, the job's memory (program.memory_limit_bytes) for the resident
// set.
//
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/hardware.h"
#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/records/verdict.h"

namespace pilot {

struct GrowthEstimate {
  std::string series;        // "device" | "host"
  int64_t from_step = 0, to_step = 0;
  int points = 0;
  double bytes_per_step = 0;  // Theil-Sen slope
  double rising_fraction = 0; // of the window's step-to-step changes, those > 0
  int64_t last_bytes = 0;     // the series at to_step
  bool grows = false;         // above noise, steady
};

// The estimate for one series (`device`: the allocator peaks, else the
// resident set); nullopt when the window holds fewer than 4 reported steps.
std::optional<GrowthEstimate> EstimateGrowth(const std::vector<StepMemory>& steps, bool device,
                                             int64_t warmup_steps);

// The verdict's memory_growth check: skip without a series (the builtin, a
// program that reported no memory figures); pass when flat; warn when it
// grows but the run's steps fit (or the run's length or the capacity is
// not known); fail when the growth carried to the run's steps exceeds it.
Check MemoryGrowthCheck(const Results& r, const Config& cfg, const HardwareCatalog& cat);

}  // namespace pilot
