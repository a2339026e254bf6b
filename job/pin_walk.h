// Private to job/pins.cc and job/pin_sources.cc: pinning one path or one
// hub revision (the contract is job/pins.h's).
#pragma once

#include <chrono>
#include <string>

#include "core/records/lock.h"
#include "job/pins.h"

namespace pilot::job {

using PinDeadline = std::chrono::steady_clock::time_point;

// program.pin entry `name` below `workdir` (absolute, links resolved).
LockPin PinPath(const std::string& workdir, const std::string& name, const PinLimits& limits,
                PinDeadline deadline);
// A hub revision "org/name[@rev]" of kind "hub_model" | "hub_dataset" in
// `cache` (absolute, links resolved; "" = none known).
LockPin PinHub(const std::string& cache, const std::string& kind, const std::string& ref,
               const PinLimits& limits, PinDeadline deadline);

}  // namespace pilot::job
