// What a run starts from: the config (with --set overrides) and the pins
// of the lock (or of the config when there is no lock).
//
// Thread-safety: LoadInputs reads files and the environment; no state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/base/status.h"

namespace pilot::runner {

// Pins from the lock (or the config when there is no lock).
struct Pins {
  uint64_t seed = 0;
  std::string train_sha256, eval_sha256;
};

// Loads the config (with --set overrides) and the lock, resolves the seed.
// Errors: kInvalid/kNotFound/kCorrupt (exit 2).
Status LoadInputs(const std::string& config_path, const std::string& lock_path,
                  const std::vector<std::string>& sets, Config* cfg, Pins* pins);

}  // namespace pilot::runner
