// How a component asks for an environment variable without reading the
// process's own environment: a lookup that returns the value, or nullopt
// when the variable is not set. Tests and the Slurm-side executables pass
// the job's environment; ProcessEnv() reads getenv().
//
// Thread-safety: ProcessEnv's lookup reads getenv(), which races with
// setenv() in another thread.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace pilot {

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process's own environment.
EnvLookup ProcessEnv();

}  // namespace pilot
