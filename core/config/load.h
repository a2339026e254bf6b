// Loading pilot.toml: read, parse against the key table
// (core/config/config_schema.h), validate across keys, fill defaults, and
// show the result. The Config it fills is core/config/config.h.
//
// Thread-safety: pure functions over their arguments (LoadOptions::env
// decides what "the environment" is).
#pragma once

#include <string>
#include <vector>

#include "core/base/env_lookup.h"
#include "core/base/status.h"
#include "core/config/config.h"

namespace pilot {

// Paths may use $USER, $HOME, $SLURM_JOB_ID, $SLURM_SUBMIT_DIR (also
// ${NAME}), looked up through LoadOptions::env; unknown names are errors.

struct LoadOptions {
  std::vector<std::string> overrides;  // "section.key=value" (TOML value
                                       // syntax; bare words are strings)
  EnvLookup env;                       // default: ProcessEnv()
  bool expand_paths = true;            // expand $VARS in path keys
  // Relative data/model paths are resolved against this directory
  // ("" = the config file's directory).
  std::string base_dir;
};

// Reads, parses, validates and fills defaults. Errors: kNotFound (no file),
// kIoError, kInvalid (every schema/syntax/range/cross-field problem, one
// message, "FILE:LINE: section.key: problem").
Result<Config> LoadConfig(const std::string& path, const LoadOptions& opts = {});
// Same, from bytes already in memory (`path` is used in messages only).
Result<Config> ParseConfig(const std::string& text, const std::string& path,
                           const LoadOptions& opts = {});

// The resolved config as JSON text (pretty) and as a table for people.
std::string ConfigToJson(const Config& c);
std::string ConfigToTable(const Config& c);

}  // namespace pilot
