// The step loop of the single stage over a Session: deferred loss reads,
// measured steps, pauses for eval and checkpoints, metrics lines and the
// progress line; and the stage's figures from the steps' records.
//
// Thread-safety: the thread that drives the Session.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/records/results.h"
#include "core/base/status.h"
#include "runner/train/device.h"
#include "runner/train/session.h"

namespace pilot::runner {

// Per-step record kept for results and metrics.
struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  double data_wait_ms = 0;
  double fb_ms = 0;
  double opt_ms = 0;
  double step_ms = 0;       // wall clock, start to start of the next step
  bool timed = true;        // false in warm-up, at a measured or paused step and the next
};

// Drives steps [first, last] with deferred reads (the loss of step s is read
// after step s+1 was queued, so the device never waits for the host),
// measures memory on the steps listed in `measure` (synchronised, peak
// reset before), and calls
// `on_pause(step)` after the steps in `pause_at` completed. Appends to
// `records`, writes metrics lines and progress. OOM and torch errors throw.
struct LoopHooks {
  std::vector<int64_t> measure;                       // steps to measure
  std::function<void(int64_t, const MemoryStats&)> on_memory;
  std::vector<int64_t> pause_at;                      // steps to stop after
  std::function<Status(int64_t)> on_pause;            // eval, checkpoint
  std::string process = "reference";                 // metrics "process"
  bool instrument = true;                             // events, reads, progress
  int warmup = -1;                                    // untimed steps; -1 = config
};
Status RunSteps(Session& s, int64_t first, int64_t last, const LoopHooks& hooks,
                std::vector<StepRecord>* records, FILE* metrics);

// Mean of step_ms over timed records and derived figures into `out`.
void Summarise(const Session& s, const std::vector<StepRecord>& records, SingleStage* out);

}  // namespace pilot::runner
