#include "runner/single/depth.h"

#include <algorithm>
#include <string>

#include "core/models/memory_model.h"
#include "core/base/strings.h"
#include "runner/train/model.h"

namespace pilot::runner {

int64_t PredictedSingleBytes(const Config& cfg, int layers, bool on_gpu) {
  Config at = cfg;
  at.model.layers = layers;
  SingleStage s;
  s.device = on_gpu ? "cuda" : "cpu";
  s.shape.params = BuiltinParameters(at.model, cfg.training.seq_len);
  s.shape.seq_len = cfg.training.seq_len;
  s.shape.micro_batch = cfg.training.micro_batch;
  s.shape.precision = cfg.training.precision;
  s.shape.optimizer = cfg.training.optimizer;
  s.shape.fused_loss = cfg.training.fused_loss;
  s.shape.activation_checkpointing = cfg.training.activation_checkpointing;
  const Workload w = WorkloadFrom(s, &at);
  const MemoryBreakdown b = SplitMemory(s, w, std::nullopt);
  MemoryQuery q;
  q.seq_len = s.shape.seq_len;
  q.micro_batch = s.shape.micro_batch;
  q.activation_checkpointing = s.shape.activation_checkpointing;
  return PredictPeak(b, w, q).total_bytes;
}

std::optional<ReducedDepth> PlanSingleDepth(const Config& cfg, std::optional<int64_t> device_bytes,
                                            double headroom) {
  if (cfg.parallel.mode != "sharded" || cfg.model.layers < 2) return std::nullopt;
  std::optional<int64_t> capacity = device_bytes;
  if (cfg.training.memory_cap_mb > 0) {
    const int64_t cap = int64_t{cfg.training.memory_cap_mb} << 20;
    capacity = capacity ? std::min(*capacity, cap) : cap;
  }
  if (!capacity || *capacity <= 0) return std::nullopt;
  const bool gpu = device_bytes.has_value();
  ReducedDepth r;
  r.full_layers = cfg.model.layers;
  r.capacity_bytes = *capacity;
  r.limit_bytes = static_cast<int64_t>((1.0 - std::clamp(headroom, 0.0, 0.9)) *
                                       static_cast<double>(*capacity));
  r.predicted_full_bytes = PredictedSingleBytes(cfg, r.full_layers, gpu);
  if (r.predicted_full_bytes <= r.limit_bytes) return std::nullopt;
  r.full_params = BuiltinParameters(cfg.model, cfg.training.seq_len);
  // The deepest that fits; one layer (and its prediction) when none does.
  for (r.layers = r.full_layers - 1; r.layers >= 1; --r.layers) {
    r.predicted_bytes = PredictedSingleBytes(cfg, r.layers, gpu);
    if (r.predicted_bytes <= r.limit_bytes || r.layers == 1) break;
  }
  r.detail = "the run's training state does not fit one process (" + FormatGiB(r.predicted_full_bytes) +
             " predicted at " + std::to_string(r.full_layers) + " layers, " + FormatGiB(r.limit_bytes) +
             " usable of " + FormatGiB(r.capacity_bytes) + "): the single stage runs " +
             std::to_string(r.layers) + " of " + std::to_string(r.full_layers) +
             " layers (" + FormatGiB(r.predicted_bytes) + " predicted)" +
             (r.predicted_bytes > r.limit_bytes ? ", and even that is predicted not to fit" : "");
  return r;
}

}  // namespace pilot::runner
