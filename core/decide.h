// Decide(): lock + config + results + verify report + policy + catalog ->
// the verdict. A pure function: no files, no clock, no environment; the
// epilog reads the inputs, calls Decide, then signs and stores the result.
//
// Checks (Check::name; each pass | warn | fail | skip):
//   pinning          one per lock problem (fail), or one pass     [prolog]
//   config_unchanged submitted sha256 == copied sha256 == the one the
//                    runner reports                               [prolog]
//   completed        results present, single stage "ok", exit 0; an OOM is
//                    a fail naming step, phase and memory         [self_reported]
//   shape            pilot seq_len / micro_batch == the run's, optimizer
//                    state included; smaller with allow_smaller_shape = warn
//                    and a non-binding verdict                    [self_reported]
//   steps            steps completed >= thresholds.min_pilot_steps
//   restore          fresh-process resume equal (CPU bitwise, GPU within
//                    thresholds.restore_tolerance)   [epilog when verify confirms]
//   checkpoint       manifest hashes, completeness (every parameter has its
//                    optimizer state), eval loss recomputed          [epilog]
//   memory_headroom  peak device bytes vs the wanted GPU type's memory
//                    with thresholds.memory_headroom free; skip on CPU
//   precision        bf16/fp16 loss vs fp32 within
//                    thresholds.precision_loss_tolerance; skip for fp32
//   memory_fit       the memory model's predicted peak for the run's shape,
//                    layout (ddp/sharded x GPUs) and GPU type within
//                    (1 - memory_headroom) of its memory (core/plan.h);
//                    calibrated by the runner's memory_calibration when the
//                    results hold one (CalibrationFrom), else residual
//   budget           the whole pipeline (core/budget.h) within 30 days (fail
//                    "does not fit a 30-day term" otherwise) and within the
//                    requested run.reservation_days (warn if not)
//   container_tag    only when container_digest_now is set: the tag still
//                    points at the pinned digest (warn when it moved; the
//                    job ran the pinned image either way)      [epilog]
// decision = GO iff no check fails. expires = issued +
// thresholds.verdict_lifetime_days. The verdict is returned unsigned.
//
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/hardware.h"
#include "core/lock.h"
#include "core/policy.h"
#include "core/results.h"
#include "core/verdict.h"
#include "core/verify_report.h"

namespace pilot {

struct DecideInput {
  Lock lock;
  // The prolog's copy of pilot.toml, parsed; nullopt when it could not be
  // (then config_error says why, and the verdict is NO-GO).
  std::optional<Config> config;
  std::string config_error;
  // results.json; nullopt when missing or invalid (results_error says why:
  // runner crashed, time limit, cancelled, bad file).
  std::optional<Results> results;
  std::string results_error;
  VerifyReport verify;  // ran = false when verify did not run
  // The container tag re-resolved by the epilog after the job ("" = not
  // re-resolved, or no registry image).
  std::string container_digest_now;
};

// `now`: Unix seconds of issue.
Verdict Decide(const DecideInput& input, const Policy& policy, const HardwareCatalog& catalog,
               int64_t now);

// The peak bytes a process needed on its device in the pilot: the largest
// of device used, reserved peak and allocated peak over the steady, first
// and resumed steps; nullopt when no device figure exists (CPU pilot).
std::optional<int64_t> PeakDeviceBytes(const SingleStage& s);

}  // namespace pilot
