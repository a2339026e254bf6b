// The verdict's checks: every name Decide() gives a Check, in the order it
// makes them, each with what it compares in one line. This list is the one
// spelling of the names: Decide names a check through CheckName(), which
// does not compile for a name missing here, and the lists of docs/formats.md
// and pilot-files(5) must say the same names in the same words
// (tests/core/decide/checks_doc_test.cc holds them to this one).
//
// Who establishes each (Check::verified_by): pinning, nodes_pinned,
// config_unchanged and pins_unchanged the prolog; container_tag and checkpoint the epilog;
// container the supervisor;
// completed's pass the supervisor when it wrote the results (its fails
// mostly the workload's own record); ptrace_scope the supervisor; restore
// the supervisor when it compared the two builtin processes itself,
// workload_compared for a user's program (root compared, the losses are the
// program's), else the workload; checkpoint_read and busy the supervisor;
// every other check the workload.
//
// Adding a verdict check `foo`, every file in order:
//   1. core/decide/checks.h (here): {"foo", "what it compares"} in kChecks,
//      at the place Decide makes it;
//   2. core/decide/decide.cc (or a file of its own beside it, as
//      ptrace_check.h, once decide.cc is long): a CheckFoo() that appends
//      MakeCheck(CheckName("foo"), status, measured, threshold, detail,
//      verified_by), called from Decide() at that place; a figure it needs
//      that results.json lacks is a field of its record first
//      (core/records/results.h, as core/records/record.h says), a threshold
//      a field of Policy's thresholds (core/records/policy.h and .cc,
//      man/pilot.conf.5);
//   3. core/decide/decide.h: the input in DecideInput, when Decide needs one
//      the epilog gathers (epilog/epilog.cc fills it);
//   4. docs/formats.md ("Check names") and man/pilot-files.5 (the verdict's
//      checks): one line each, `foo` and the same words as here, in the
//      same order;
//   5. tests/core/decide/decide_test.cc: a verdict where it passes and one
//      where it fails (or warns or skips), and what the decision becomes.
//
// Thread-safety: constants and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "core/records/verdict.h"

namespace pilot {

struct CheckInfo {
  std::string_view name;     // Check::name
  std::string_view meaning;  // one line, what the check compares
};

inline constexpr CheckInfo kChecks[] = {
    {"pinning",
     "the prolog pinned what the config names: one fail per problem it recorded in the lock, "
     "else one pass"},
    {"nodes_pinned",
     "a job of several nodes: every other node's pins (the versions the ranks share, GPUs, "
     "container) against the lock; skip when the nodes do not share the state directory"},
    {"container_tag",
     "only when the epilog resolved a registry image's tag again: the tag still points at the "
     "pinned digest (warn when it moved; the job ran the pinned image either way)"},
    {"container",
     "only when the program ran in a container runtime: the digest the supervisor read back "
     "from the runtime equals the digest the prolog pinned (fail naming both, or when none was "
     "read back)"},
    {"config_unchanged",
     "the submitted config's sha256 equals that of the prolog's copy and the one the workload "
     "reports"},
    {"pins_unchanged",
     "a user's program: every program.pin file and folder (sha256, git commit and dirtiness) "
     "and hub revision (commit, files) the prolog pinned equals what the plugin pinned at "
     "submit; one fail per entry that moved, naming it (skip when nothing is pinned)"},
    {"completed",
     "results present, the single stage ok, exit 0 (for a user's program, every process of every "
     "phase exited 0 by itself); an out-of-memory fails naming step, phase and memory"},
    {"ptrace_scope",
     "results from the supervisor: the node's kernel.yama.ptrace_scope it read while the "
     "workload ran is 1 or above (below 1, or no Yama: fail, or warn with "
     "require_ptrace_scope = false)"},
    {"shape",
     "the pilot's seq_len and micro_batch are the run's, optimizer state included (smaller with "
     "allow_smaller_shape: warn and a non-binding verdict)"},
    {"steps", "the steps completed reach thresholds.min_pilot_steps"},
    {"restore",
     "a fresh process resumed from the checkpoint and skipped nothing; bitwise equal on a CPU with "
     "deterministic kernels, else its first step within thresholds.restore_first_tolerance and "
     "each later one within thresholds.restore_tolerance or, for a program, within "
     "thresholds.restore_noise_margin times a second resumed process's spread"},
    {"checkpoint_read",
     "a user's program only: before its first step the resumed process read at least "
     "thresholds.min_checkpoint_read_fraction of the bytes of the checkpoint the reference wrote, "
     "as the page cache showed after the supervisor dropped it (where it cannot tell, the files it "
     "opened decide); fail when another process of the user opened them meanwhile; not watched "
     "(fanotify): fail when program_independent_checks names it, else warn"},
    {"busy",
     "a user's program only: while it reported steps, the job's GPUs were busy for at least "
     "thresholds.min_busy_device_utilization of the time (NVML) or its processes kept "
     "thresholds.min_busy_cpu_cores CPU cores busy (/proc), per phase, as the supervisor "
     "measured (skip when no phase reported steps for 2 s: pilot grant then refuses the verdict)"},
    {"resumed_work",
     "a user's program only: the CPU time the resumed process spent before its first record, "
     "beyond the reference's before its step 1, stayed below half the CPU time K of the "
     "reference's steps took plus twice its save and a 1 CPU-s margin (fail: it trained steps "
     "1..K again; skip when K steps are too little work to tell, or were not measured)"},
    {"checkpoint",
     "verify ran: COMPLETE marker, manifest sizes and hashes, optimizer state for every "
     "parameter, eval loss recomputed within tolerance (a program's checkpoint: its files "
     "unchanged since the supervisor listed them, readable, optimizer state among them)"},
    {"memory_headroom",
     "the peak device bytes against the memory of the wanted GPU type with "
     "thresholds.memory_headroom free (skip without device figures, warn when no memory size "
     "is known)"},
    {"memory_growth",
     "a user's program only: the reference's per-step device (allocator peak) and resident "
     "memory past warm-up, when most steps grew, carried to the run's steps (run.target_steps "
     "or target_tokens) against the wanted GPU's or the job's memory: fail when exceeded, warn "
     "when it grows but fits or the run's length is unknown, skip without a series"},
    {"precision",
     "the bf16 or fp16 loss against fp32 within thresholds.precision_loss_tolerance (skip for "
     "fp32, warn when not measured); a user's program: the precision its probe saw (autocast "
     "dtype, parameters, gradient scaler), never compared, skip"},
    {"node_stage",
     "only when the node stage failed: a fail naming the phase and the rank that failed (its "
     "node under srun), and then no other node check"},
    {"node_restore",
     "every restore of the node stage's checkpoint, at the same and at another world size, "
     "ran, skipped nothing and resumed equal"},
    {"node_levels",
     "ranks across nodes: the all-reduce times within a node and between nodes "
     "(stages.node.comm.intra_node and inter_node), recorded and never failed; skip on CPU"},
    {"scaling",
     "per-GPU throughput against the single stage reaches thresholds.min_scaling_efficiency "
     "(warn below; skip on CPU)"},
    {"memory_fit",
     "the memory model's predicted peak for the run's shape, layout and GPU type within "
     "(1 - memory_headroom) of its memory (warn when no GPU type was chosen)"},
    {"budget",
     "the whole pipeline within a 30-day term (else fail) and within run.reservation_days "
     "(else warn); skip without a throughput, or without a plan (a program that reported no "
     "parameter count; the detail says why, and that pilot grant refuses a verdict without a "
     "budget)"},
};

// `name`, when kChecks holds it; a name it lacks does not compile.
consteval std::string_view CheckName(std::string_view name) {
  for (const CheckInfo& c : kChecks) {
    if (c.name == name) return c.name;
  }
  throw "not a check of kChecks (core/decide/checks.h)";
}

// A verdict check; `name` is CheckName()'s.
inline Check MakeCheck(std::string_view name, CheckStatus st, std::string measured,
                       std::string threshold, std::string detail, VerifiedBy by) {
  return Check{std::string(name), st, std::move(measured), std::move(threshold),
               std::move(detail), by};
}

}  // namespace pilot
