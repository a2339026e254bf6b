// `pilot-runner run --stage node`: the full-node stage.
//
// The launching process (the one the user or the batch script starts) runs
// three phases, each as fresh rank processes:
//   train         W ranks run steps 1..N from the seed, checkpoint (sharded)
//                 after step K, and write the final parameters;
//   resume        W ranks restore step K in fresh processes, run K+1..N and
//                 compare losses and final parameters with train's;
//   resume-other  the same at another world size (W > 1: one process;
//                 W = 1: parallel.nproc processes), restoring W's shards.
// Ranks are started by a Launcher (launch/launcher.h): locally
// (PILOT_* variables, `--nproc N` or parallel.launcher = "local") or as one
// `srun` step (SLURM_* variables). What a rank runs is the workload's
// (runner/workload/workload.h).
// A rank that fails ends its phase: the launching process names it and stops the
// others within kNodeGraceSeconds + 5 s; the ranks themselves give up on a
// collective after the group timeout (PILOT_RUNNER_NODE_TIMEOUT seconds,
// default 300).
//
// Rank processes write <out>/node/<phase>/rank-NNNNN.json; the launching
// process folds them into the stage's summary (stages.node of results.json).
//
// Thread-safety: process-level entry points.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "core/config/config.h"
#include "core/records/exit_codes.h"
#include "core/records/results_node.h"
#include "runner/run_options.h"

namespace pilot::runner {

inline constexpr int kNodeGraceSeconds = 10;

// True when this process is a rank of the node stage: PILOT_RANK set, or
// inside an srun step of several tasks, or of one task that the launcher
// started (PILOT_NODE_DIR set).
bool IsNodeRank();

// The launching process: the three phases with `nproc` processes (0 = parallel.nproc,
// or the visible GPUs, or 2 on the CPU). `single_tokens_per_second` (the
// single stage's figure, when it ran) gives the scaling efficiency.
// Fills `node` with the stage summary; returns the exit status.
int RunNodeStage(const RunOptions& opts, const Config& cfg, int nproc,
                 std::optional<double> single_tokens_per_second, NodeStage* node);

}  // namespace pilot::runner
