// The verdict's ptrace_scope check (kChecks, core/decide/checks.h): the
// node's kernel.yama.ptrace_scope, as the supervisor read it while the
// workload ran (results.json's supervisor.ptrace_scope).
//
// Below 1, or -1 (no Yama at all), any other process of the job's user on
// the node (a login shell, another of their jobs) can attach to the
// workload with ptrace and change what it reports or what it does. The
// verdict names such a node always; the site's require_ptrace_scope
// (pilot.conf(5)) decides whether it fails the verdict or warns.
//
// Thread-safety: pure.
#pragma once

#include <optional>

#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/records/verdict.h"

namespace pilot {

// pass at 1 and above; at 0 or -1 fail (policy.require_ptrace_scope) or
// warn; verified_by supervisor. nullopt when the results hold no
// supervisor record (no results, or results of a runner started by hand):
// nothing was read on the node then.
std::optional<Check> PtraceScopeCheck(const Results* results, const Policy& policy);

}  // namespace pilot
