// Decide(): lock + config + results + verify report + policy + catalog ->
// the verdict. A pure function: no files, no clock, no environment; the
// epilog reads the inputs, calls Decide, then signs and stores the result.
//
// Checks (Check::name; each pass | warn | fail | skip): kChecks in
// core/decide/checks.h names every one in the order Decide makes them, with
// what it compares and who establishes it. Which apply:
//   always           pinning, nodes_pinned (a job of several nodes),
//                    container_tag (container_digest_now set, a registry
//                    image), config_unchanged, completed, checkpoint (a
//                    program's own checkpoint in program mode)
//   results from the supervisor
//                    ptrace_scope (core/decide/ptrace_check.h)
//   a single stage and a parsed config
//                    shape, steps, restore, memory_headroom, precision
//   a node stage in results.json
//                    node_stage (failed: then no other node check),
//                    node_restore, node_levels (comm levels recorded),
//                    scaling (a measured efficiency)
//   a plan (single stage, config, a parameter count)
//                    memory_fit (core/models/plan.h; calibrated by the
//                    runner's memory_calibration when the results hold one,
//                    CalibrationFrom, else residual), budget
//                    (core/models/budget.h)
// Then the policy's independent_checks fail where only the workload vouches
// for a pass, and a failed exit the checks do not explain fails completed.
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
