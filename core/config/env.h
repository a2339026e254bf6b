// Variables in pilot.toml paths: $USER, $HOME, $SLURM_JOB_ID and
// $SLURM_SUBMIT_DIR, written $NAME or ${NAME}. "$$" stands for one "$".
// No other name is accepted, so a typo is an error rather than an empty
// string spliced into a path.
//
// Thread-safety: pure functions; the lookup decides what "the environment" is.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/env_lookup.h"
#include "core/base/status.h"

namespace pilot {

// Same type as pilot::EnvLookup in core/config/config.h: the value of a variable, or
// nullopt when it is not set.
using VariableLookup = std::function<std::optional<std::string>(const std::string&)>;

// The names a path may use, in documentation order, without the "$".
const std::vector<std::string>& KnownPathVariables();

// Expands every $NAME / ${NAME} in `text` through `lookup`.
// When `lookup` is null the names are checked but `text` is returned as is
// (used where the variables are not known yet, e.g. at submission).
// Errors (kInvalid; `what` is empty, the caller adds its context):
//   "unknown variable $FOO" (hint lists the known ones), "$HOME is not set",
//   "unterminated ${", "'$' must be followed by a variable name" (hint: $$).
Result<std::string> ExpandVariables(std::string_view text, const VariableLookup* lookup);

}  // namespace pilot
