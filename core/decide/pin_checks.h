// The verdict's checks of what was pinned against what ran (kChecks,
// core/decide/checks.h): the prolog's problems, the other nodes' pins, the
// config and the program's pins since submit, and the container image
// (its tag again at the epilog, the digest the supervisor read back).
//
//   pinning           one fail per problem in the lock, else one pass
//   nodes_pinned      a job of several nodes: each other node's record
//                     against the lock (versions the ranks share, GPUs,
//                     container); skip when their records are not here
//   container_tag     a registry image's tag resolved again by the epilog
//   container         the digest that ran, read back from the runtime
//   config_unchanged  the config's sha256 at submit, copy and run
//   pins_unchanged    program files and hub revisions at submit and start
//
// Each appends its checks to `out` in the order Decide() makes them.
// Thread-safety: pure.
#pragma once

#include <vector>

#include "core/decide/decide.h"
#include "core/records/verdict.h"

namespace pilot {

void CheckPinning(const DecideInput& in, std::vector<Check>* out);
void CheckNodesPinned(const DecideInput& in, std::vector<Check>* out);
void CheckContainerTag(const DecideInput& in, std::vector<Check>* out);
void CheckContainerRan(const DecideInput& in, std::vector<Check>* out);
void CheckConfig(const DecideInput& in, std::vector<Check>* out);
void CheckPins(const DecideInput& in, std::vector<Check>* out);

}  // namespace pilot
