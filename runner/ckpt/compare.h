// The restore comparison, one for both stages: a resumed trajectory
// against the reference run's (losses step by step, then the final
// parameters against the reference's safetensors file). The stages decide
// what "equal" means (bitwise on the CPU, within eval.restore_tolerance on
// GPUs); these functions measure.
//
// Thread-safety: pure functions over their arguments (CompareParameters
// reads a file and copies tensors to the host).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/decide/restore_check.h"
#include "core/base/status.h"
#include "runner/train/model.h"

namespace pilot::runner {

// The loss comparison is core's (core/decide/restore_check.h): the supervisor,
// which has no torch, makes it too.
using ::pilot::CompareLosses;
using ::pilot::LossDiff;

struct ParamDiff {
  double max_abs = 0;  // element-wise max |a - b|
  // ||a - b|| / ||b|| over all parameters together (single elements of
  // near-zero parameters make element-wise relative figures meaningless).
  double max_rel = 0;
  int64_t compared = 0;  // parameters compared
};

// `params` (on any device) against the float32 tensors of the same names
// and shapes in the safetensors file `reference_path`.
// Errors: those of reading the file (kNotFound, kCorrupt, kIoError).
Result<ParamDiff> CompareParameters(const NamedTensors& params, const std::string& reference_path);

}  // namespace pilot::runner
