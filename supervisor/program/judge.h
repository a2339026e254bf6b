// Judging a user's program from what the supervisor saw of its phases
// (pilot-program(7)): whether a phase ran as the protocol asks, whether the
// resumed process continued the reference's trajectory, and the stage
// records of results.json built from the metrics records.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/decide/restore_check.h"
#include "core/records/results.h"
#include "supervisor/program/group.h"

namespace pilot::supervisor {

struct PhaseExpect {
  std::string process;      // "reference" | "resumed"
  int64_t first_step = 1;   // 1, or K+1 for the resumed process
  int64_t last_step = 0;    // N
  int ranks = 1;            // ranks whose records are expected (0..ranks-1)
  double step_timeout = 0;  // for the message
  bool loss_pattern = false;
};

// Why a phase failed, for the verdict; nullopt when it ran as asked. A
// process that failed is named by the exception that ended it (the
// traceback's, core/records/python_error.h: type, message, file:line),
// else by its last stderr line; of several ranks that failed, the first
// to end, with how many failed after it; an srun step's, by its failed
// task's own lines. Known frameworks' warnings follow as hints
// (StderrHints).
struct PhaseProblem {
  std::string kind;         // "oom" | "error" | "hang" | "nan" | "protocol"
  int64_t step = 0;         // the step it happened at (the next one for a crash)
  std::optional<int> rank;
  std::string message;      // one sentence a user acts on
};
std::optional<PhaseProblem> CheckPhase(const GroupResult& g, const PhaseExpect& e);

// Whether `stderr_tail` shows an allocator failure (CUDA or CPU): its
// exception when it ends in one (IsOutOfMemoryError), else its last words.
bool LooksOutOfMemory(const std::string& stderr_tail);

// Compares the resumed process's steps K+1..N with the reference's, rank
// by rank: the loss (bitwise, or by the noise rule of
// core/decide/restore_check.h against `repeat`, a second resumed process,
// when one ran), the learning rate exactly, and eval_loss (as the loss,
// its first value not a forward) where both report them. Fills `info`
// (ran, equal, mode, diffs, detail naming the first step that differs and
// by how much). needs_repeat: nothing failed but steps past the tolerance,
// which only a second resumed process can judge.
struct RestoreRule {
  bool bitwise = false;
  NoiseRule noise;  // its floor is the tolerance
};
struct RestoreComparison {
  RestoreInfo info;
  bool lr_compared = false;
  bool eval_compared = false;
  bool needs_repeat = false;
};
RestoreComparison CompareResumed(const GroupResult& reference, const GroupResult& resumed,
                                 const GroupResult* repeat, int64_t k, int64_t n, int ranks,
                                 const RestoreRule& rule);

// The single stage as results.json records it, from the reference phase
// (and the resumed one's first record for memory_resumed).
struct SingleInputs {
  const GroupResult* reference = nullptr;
  const GroupResult* resumed = nullptr;  // may be null
  int64_t steps = 0, warmup_steps = 0, checkpoint_step = 0;
  std::string device;       // "cpu" | "cuda" as configured ("auto": from the records)
};
SingleStage SingleFromRecords(const SingleInputs& in);

// Memory figures of rank 0's first step (a resumed process's: it may peak
// higher than a fresh one), or nullopt without records.
std::optional<MemoryStats> FirstStepMemory(const GroupResult& g, const std::string& device);

// One rank's memory figures from one of its records (node stage).
NodeMemoryStats NodeMemoryOf(const MetricRecord& r);

// The records of `rank`, by step (the last one of a step wins).
std::map<int64_t, MetricRecord> StepsOf(const GroupResult& g, int rank);

// Tokens per second and step time over steps after `warmup` of one rank's
// records, leaving out the step after `checkpoint_step` (the save).
struct Throughput {
  double tokens_per_second = 0;
  double step_ms = 0, step_ms_median = 0, data_wait_ms = 0, data_wait_max_ms = 0;
  int timed_steps = 0;
};
Throughput ThroughputOf(const std::map<int64_t, MetricRecord>& steps, int64_t warmup,
                        int64_t checkpoint_step);

}  // namespace pilot::supervisor
