// What the supervisor writes into results.json of a phase of a user's
// program once it is over (pilot-files(5), program and stages): its
// processes (exit statuses, records, the end of their stderr) and its busy
// figures, what outlived it; what the reference's records say beyond its
// losses; the node stage's per-rank figures; and why a restore differs.
// Each line that matters is also logged ("pilot: supervisor: ...").
//
// Thread-safety: pure but for the log lines on standard error.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/records/results.h"
#include "launch/layout.h"
#include "supervisor/program/group.h"

namespace pilot::supervisor {

// The job's GPUs' mean utilization (0..1) between two times; nullopt
// without samples.
using DeviceUtilization = std::function<std::optional<double>(std::chrono::steady_clock::time_point,
                                                              std::chrono::steady_clock::time_point)>;

// The phase's processes, its busy figures (with the GPUs' utilization over
// the same window, where `device` can tell) and what outlived it, into `p`.
void NotePhase(const GroupResult& g, const std::string& stage, const std::string& process,
               const DeviceUtilization& device, ProgramInfo* p);

// What the reference's records say beyond its losses: the memory series,
// the precision it trained in, what it ran with (the GPU's name makes its
// measured throughput the basis of the plan and budget), and the FLOPs its
// parameters imply.
void NoteReference(const GroupResult& ref, ProgramInfo* p, Versions* v, SingleStage* s);

// The node stage's reference: each rank's throughput, memory and host
// (srun's block distribution across nodes), rank 0's losses, and the
// scaling against the single stage's tokens per second (0: none).
void NoteNodeReference(const GroupResult& ref, const launch::NodeLayout& layout, int64_t warmup_steps,
                       int64_t at_step, double single_tokens_per_second, NodeStage* n);

// The node stage's resumed phase: each rank's memory at its first step.
void NoteNodeResumed(const GroupResult& resumed, NodeStage* n);

struct RestoreHints {
  bool rewritten = false;             // CheckpointSaves::rewritten
  int64_t at_step = 0;                // K
};

// What is known of why a restore differs, each part after "; ": the state
// fingerprints, what the program itself printed about its resume (a
// framework's warning), and the hints.
std::string RestoreDiagnosis(const std::vector<StateComponentDiff>& state, const GroupResult& resumed,
                             const RestoreHints& hints);

}  // namespace pilot::supervisor
