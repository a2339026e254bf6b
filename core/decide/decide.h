// Decide(): lock + config + results + verify report + policy + catalog ->
// the verdict. A pure function: no files, no clock, no environment; the
// epilog reads the inputs, calls Decide, then signs and stores the result.
//
// Checks (Check::name; each pass | warn | fail | skip), in the order Decide
// makes them; [who] is the check's verified_by:
//   pinning          one per lock problem (fail), or one pass     [prolog]
//   container_tag    only when container_digest_now is set and the image
//                    was pinned from a registry: the tag still points at
//                    the pinned digest (warn when it moved; the job ran the
//                    pinned image either way)                      [epilog]
//   config_unchanged submitted sha256 == copied sha256 == the one the
//                    runner reports                               [prolog]
//   completed        results present, single stage "ok", exit 0; an OOM is
//                    a fail naming step, phase and memory         [self_reported]
// With a single stage and a parsed config:
//   shape            pilot seq_len / micro_batch == the run's, optimizer
//                    state included; smaller with allow_smaller_shape = warn
//                    and a non-binding verdict                    [self_reported]
//   steps            steps completed >= thresholds.min_pilot_steps
//   restore          fresh-process resume ran, skipped nothing and is equal
//                    (bitwise mode: loss and parameters exactly; otherwise
//                    rel loss diff <= thresholds.restore_tolerance)
//                    [epilog when verify recomputed the eval loss within
//                    tolerance, else self_reported]
// Always:
//   checkpoint       verify ran, COMPLETE marker, manifest sizes and hashes,
//                    every parameter has its optimizer state, eval loss
//                    recomputed within tolerance                   [epilog]
// With a single stage and a parsed config:
//   memory_headroom  peak device bytes (PeakDeviceBytes) vs the memory of
//                    the wanted GPU type (else the lock's GPUs, else the
//                    device total) with thresholds.memory_headroom free;
//                    skip without device figures (CPU), warn when no memory
//                    size is known
//   precision        bf16/fp16 loss vs fp32 within
//                    thresholds.precision_loss_tolerance; skip for fp32,
//                    warn when not measured
// When results.json has a node stage:
//   node_stage       fail when the stage failed (phase, rank, message);
//                    then no other node check
//   node_restore     every sharded restore (same and other world size) ran,
//                    skipped nothing and resumed equal
//   scaling          only with a measured efficiency: per-GPU throughput
//                    against the single stage >= thresholds.
//                    min_scaling_efficiency (warn below); skip on CPU
// When a plan could be made (single stage, config, a parameter count):
//   memory_fit       the memory model's predicted peak for the run's shape,
//                    layout (ddp/sharded x GPUs) and GPU type within
//                    (1 - memory_headroom) of its memory (core/models/plan.h);
//                    calibrated by the runner's memory_calibration when the
//                    results hold one (CalibrationFrom), else residual;
//                    warn when no GPU type was chosen
//   budget           the whole pipeline (core/models/budget.h) within 30 days (fail
//                    "does not fit a 30-day term" otherwise) and within the
//                    requested run.reservation_days (warn if not); skip
//                    without a throughput
// hardware = one entry per GPU option of the plan (no plan: per candidate
// type of [hardware], else per catalog type, "no memory measurement");
// budget = the plan's. decision = GO iff no check
// fails. expires = issued + thresholds.verdict_lifetime_days. The verdict is
// returned unsigned.
//
// Thread-safety: pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/hardware.h"
#include "core/records/lock.h"
#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/records/verdict.h"
#include "core/records/verify_report.h"

namespace pilot {

// What the prolog of another node of a job of several pinned there
// (STATE/nodes/JOBID/NODE.json), as the first node's epilog found it.
struct OtherNodePins {
  std::string node;
  std::optional<Lock> pins;  // nullopt: no readable record (problem says why)
  std::string problem;
};

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
  // Nodes of the job slurmctld reported down when a pilot of several nodes
  // did not finish ("pn2 (Not responding)"): the completed check names them.
  std::vector<std::string> nodes_down;
  // A job of several nodes: every other node's pins where the first node
  // can read them (a state directory the nodes share); empty when it can
  // read none (each node's own state directory). The nodes_pinned check
  // compares them with the lock.
  std::vector<OtherNodePins> other_nodes;
};

// `now`: Unix seconds of issue.
Verdict Decide(const DecideInput& input, const Policy& policy, const HardwareCatalog& catalog,
               int64_t now);

// The peak bytes a process needed on its device in the pilot: the largest
// of device used, reserved peak and allocated peak over the steady, first
// and resumed steps; nullopt when no device figure exists (CPU pilot).
std::optional<int64_t> PeakDeviceBytes(const SingleStage& s);

}  // namespace pilot
