// The restore comparison of both stages.
#include "runner/ckpt/compare.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "runner/ckpt/safetensors.h"

namespace pilot::runner {

Result<ParamDiff> CompareParameters(const NamedTensors& params, const std::string& reference_path) {
  PILOT_RETURN_IF_ERROR(ReadSafetensorsHeader(reference_path).status());
  std::map<std::string, at::Tensor> ref;
  for (const auto& [name, p] : params) ref[name] = at::empty(p.sizes(), at::kFloat);
  PILOT_RETURN_IF_ERROR(LoadSafetensors(reference_path, ref).status());
  c10::NoGradGuard no_grad;
  ParamDiff r;
  double diff_sq = 0, ref_sq = 0;
  for (const auto& [name, p] : params) {
    at::Tensor a = p.detach().to(at::kCPU).to(at::kDouble), b = ref[name].to(at::kDouble);
    at::Tensor d = a - b;
    r.max_abs = std::max(r.max_abs, d.abs().max().item<double>());
    diff_sq += d.pow(2).sum().item<double>();
    ref_sq += b.pow(2).sum().item<double>();
    ++r.compared;
  }
  r.max_rel = std::sqrt(diff_sq) / std::max(std::sqrt(ref_sq), 1e-30);
  return r;
}

}  // namespace pilot::runner
