// The single stage's depth. A sharded run (parallel.mode = "sharded")
// exists because its training state does not fit one GPU; its single stage
// still proves the code path, the checkpoint and the fresh-process restore,
// at the most layers that fit one process (same d_model, heads, seq_len
// and micro-batch), and says so (stages.single.reduced_depth). Every other
// mode runs the config's depth: one GPU must hold its state.
//
// "Fits": the memory model's analytic prediction of one process's peak
// (core/models/memory_model.h: parameters, gradients and optimizer state,
// activations, assumed workspace and runtime) within (1 - headroom) of the
// memory one process may use: the device's, or training.memory_cap_mb when
// smaller (a CPU has only the cap).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "core/config/config.h"
#include "core/records/results.h"

namespace pilot::runner {

// nullopt: the config's depth (not sharded, no capacity known, or it fits).
// Otherwise the depth to run and why; at least one layer, even when that is
// predicted not to fit either (the stage then shows what happens).
std::optional<ReducedDepth> PlanSingleDepth(const Config& cfg, std::optional<int64_t> device_bytes,
                                            double headroom);

// The predicted one-process peak (bytes) of `cfg`'s model at `layers`.
int64_t PredictedSingleBytes(const Config& cfg, int layers, bool on_gpu);

}  // namespace pilot::runner
