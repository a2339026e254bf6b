// The plan: memory model + throughput + budget for one pilot and one
// what-if query, over every candidate GPU type. Used by Decide (the run as
// configured), `pilot plan` (what-ifs) and `pilot report`.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/models/budget.h"
#include "core/config/config.h"
#include "core/records/hardware.h"
#include "core/models/memory_model.h"
#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/models/step_time.h"
#include "core/models/throughput.h"

namespace pilot {

// What to plan for; 0 / "" = the config's value.
struct PlanQuery {
  std::string gpu_type;   // "" = run.gpu_type, else the measured type, else the first fit
  int nodes = 0;          // run.nodes
  int gpus_per_node = 0;  // run.gpus_per_node
  int micro_batch = 0;    // run.micro_batch
  int seq_len = 0;        // run.seq_len
  int grad_accum = 0;     // run.grad_accum
  std::string mode;       // "ddp" | "sharded"; "" = parallel.mode
  std::optional<bool> activation_checkpointing;  // training.activation_checkpointing
  // Replay the pilot's allocator requests where they apply
  // (core/models/memory_replay.h). Decide does not: the epilog's time is bounded
  // and a replay takes about a second (a user's recordings, up to the
  // replay's own limit, more).
  bool replay_memory = true;
  // A program's loaded native extensions (ExtensionsToQualify): what a ROCm
  // type's fit note names as needing qualification.
  std::vector<std::string> native_extensions;
};

struct GpuOption {
  GpuType gpu;
  MemoryPrediction memory;
  FitResult fit;
  ThroughputProjection throughput;
  ScalingEstimate scaling;  // at the query's nodes
  int recommended_nodes = 1;
};

struct Plan {
  Workload workload;
  MemoryBreakdown breakdown;
  MemoryQuery memory_query;  // the resolved shape and layout
  int nodes = 1;
  int gpus_per_node = 1;
  int grad_accum = 1;              // micro-batches per optimizer step
  int bucket_mb = 25;              // parallel.bucket_mb of the config
  std::vector<GpuOption> options;  // the config's candidates found in the catalog
  int chosen = -1;                 // index into options; -1 = none
  Budget budget;                   // on the chosen type at `nodes`
  // The pilot's step moved to the query's shape on the GPU it ran on
  // (core/models/step_time.h); nullopt when the results hold no step timings.
  std::optional<StepTimeEstimate> step_time;
  // The replay of the pilot's allocator requests at the query's shape
  // (core/models/memory_replay.h), which every option's memory then uses; when it
  // does not apply, why (empty for a CPU pilot).
  std::optional<ReplayPrediction> replay;
  std::string replay_why;
  std::vector<std::string> notes;  // assumptions, for people
};

// Errors: kInvalid for a query that names a GPU type not in the catalog, or
// a mode other than ddp/sharded, or non-positive shapes.
// A program's native extensions as the ROCm note names them:
// "flash_attn (flash-attn 2.7.4)", "my_ops (built outside any installed
// distribution)"; empty for the builtin.
std::vector<std::string> ExtensionsToQualify(const Results& results);

Result<Plan> MakePlan(const SingleStage& s, const Config& cfg, const HardwareCatalog& cat,
                      const Policy& policy, const PlanQuery& q = {},
                      const std::optional<MemoryCalibration>& calibration = std::nullopt,
                      const std::optional<NodeMeasurement>& node = std::nullopt);

}  // namespace pilot
