// What the probe's lines tell beyond the losses (pilot-program(7)): the
// per-step memory series a leak shows in, the precision the program
// trained in, what it ran with, and the training state's fingerprints at
// the save of step K and after the restore, compared component by
// component so that a wrong restore names what was not restored.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/records/results.h"
#include "supervisor/program/group.h"

namespace pilot::supervisor {

// Every step `rank` reported, in step order, with its memory fields.
std::vector<StepMemory> MemorySteps(const GroupResult& g, int rank);

// The precision the records of `rank` show; reported = false when none of
// its records carried a precision field.
ProgramPrecision PrecisionOf(const GroupResult& g, int rank);

// The shape's precision word for what the probe saw: "bf16" or "fp16"
// (autocast, or parameters in that dtype), "fp32", or "" when not reported.
std::string PrecisionWord(const ProgramPrecision& p);

// Rank 0's env line (else the first one); nullopt when there was none.
std::optional<ProgramEnvironment> EnvironmentOf(const GroupResult& g);

// The reference's "saved" fingerprints of step k against the resumed
// process's "restored" ones, per rank and component (the union of both
// sides' components, in name order, rank by rank). Empty when either side
// sent none for step k.
std::vector<StateComponentDiff> CompareState(const GroupResult& reference, const GroupResult& resumed,
                                             int64_t k);

// One sentence for the restore's reason: "not restored: torch CPU RNG state
// (rank 0), LR scheduler (last_epoch 21, saved last_epoch 20); restored:
// model, optimizer state", or, when every component is equal, that the
// losses differ for state outside them. "" when `diffs` is empty.
std::string StateDiagnosis(const std::vector<StateComponentDiff>& diffs);

// A component's name in the verdict's words ("rng.torch": "torch CPU RNG
// state"); an unknown one as the program named it.
std::string ComponentWords(const std::string& component);

}  // namespace pilot::supervisor
