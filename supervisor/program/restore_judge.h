// The restore's decision for a user's program where more than the losses
// decide it: the rule from the config and the site's thresholds, the state
// fingerprints that must be equal in every mode, and the second resumed
// process that measures the kernels' noise when a step is past the
// tolerance (core/decide/restore_check.h, RESTORE in pilot-program(7)).
//
// Thread-safety: pure functions; CompareWithNoise calls `run_repeat`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/policy.h"
#include "supervisor/program/judge.h"
#include "supervisor/program/phase_outcome.h"

namespace pilot::supervisor {

// The config's tolerance may be tighter than the site's, never looser.
RestoreRule RestoreRuleFor(const Config& cfg, const Thresholds& site, bool bitwise);

// "" when every component both sides fingerprinted is equal; else the
// sentence (RestoreDiagnosis names the components).
std::string StateDiffers(const std::vector<StateComponentDiff>& state, int64_t k);

// Fails `equal` for a state that differs; its sentence replaces a detail
// that decided nothing (steps past the tolerance, not measured).
void RequireState(const std::vector<StateComponentDiff>& state, int64_t k, const RestoreComparison& c,
                  bool* equal, std::string* detail);

// The state fingerprints of the reference's save against the resumed
// process's restore, required equal (RequireState), and when the restore
// is not equal the diagnosis added to `detail` (RestoreDiagnosis).
std::vector<StateComponentDiff> JudgeState(const GroupResult& ref, const GroupResult& res,
                                           const RestoreComparison& c, const RestoreHints& hints,
                                           bool* equal, std::string* detail);

// CompareResumed; where it needs a repeat and the state does not decide
// already, `run_repeat` starts the second resumed process and its steps
// are compared again. nullopt: the pilot was stopped meanwhile (run_repeat
// returned nullopt).
std::optional<RestoreComparison> CompareWithNoise(
    const GroupResult& ref, const GroupResult& res, int64_t k, int64_t n, int world,
    const RestoreRule& rule, const PhaseExpect& expect,
    const std::function<std::optional<GroupResult>()>& run_repeat);

// The restore of a resumed process that failed (`why`) before its steps
// could be compared.
RestoreInfo UnequalRestore(bool bitwise, int64_t k, int64_t n, const std::string& why);

// The node stage's restore record from its comparison.
void NoteNodeComparison(const RestoreComparison& c, NodeRestore* nr);

}  // namespace pilot::supervisor
