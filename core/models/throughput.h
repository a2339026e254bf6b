// Throughput projection: tokens per second per GPU on each catalog type,
// and the scaling of a data-parallel run across GPUs and nodes.
//
// Per GPU type (ProjectThroughput):
//   - pilot on a catalog GPU: the step splits into compute (step - data
//     wait) and data wait. Compute scales with the catalog's dense BF16
//     TFLOP/s ratio, assuming the measured MFU holds on the other type; the
//     data wait (input pipeline, CPU side) stays as measured.
//   - pilot on a CPU (or an unknown GPU): tokens/s = assumed MFU
//     (policy planning.assumed_mfu) x peak BF16 FLOP/s / FLOPs per token.
//     FLOPs per token: results' flops_per_token, else 6 N + 12 L d T.
// Scaling (ProjectScaling), per optimizer step and GPU:
//   step(P) = compute + data wait + exposed communication(P)
//   communication(P), ring all-reduce of the fp32 gradients:
//     2 (P-1)/P x 4 N / bandwidth + 2 (P-1) x buckets x latency
//   (sharded: x 1.5 for the parameter all-gathers and gradient
//   reduce-scatters), bandwidth = the GPU link inside a node, else
//   min(link, planning.network_gb_per_s); buckets = gradient bytes /
//   parallel.bucket_mb. No overlap with the backward pass is assumed (a
//   conservative bound). With a node-stage measurement (NodeMeasurement) the
//   measured exposed communication replaces the analytic one at the measured
//   GPU count and is scaled by the analytic ratio elsewhere; a node stage
//   across nodes that timed an all-reduce between them (stages.node.comm.
//   inter_node) gives the bandwidth between nodes, its bus bandwidth
//   2 (g-1)/g x bytes / time over g nodes, in place of
//   planning.network_gb_per_s.
//   efficiency(P) = step(1) / step(P).
// RecommendNodes: the largest node count <= planning.max_nodes whose
// efficiency >= thresholds.min_scaling_efficiency.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/hardware.h"
#include "core/models/memory_model.h"
#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/records/results_node.h"

namespace pilot {

// The node stage's figures (not yet in results.json schema 1).
struct NodeMeasurement {
  int gpus = 0;  // processes of the node stage
  double tokens_per_second_per_gpu = 0;
  double comm_exposed_fraction = 0;  // exposed communication / step time
  double data_wait_fraction = 0;     // data wait / step time
  // The bus bandwidth of the measured all-reduce between nodes, GB/s
  // (nullopt: the stage ran on one node).
  std::optional<double> inter_node_gb_per_s;
};

// The figures of a finished node stage (stages.node of results.json):
// world size, mean tokens/s per rank, exposed communication fraction and
// data stall / step time; nullopt when the stage did not finish ("ok") or
// measured no step time.
std::optional<NodeMeasurement> NodeMeasurementFrom(const NodeStage& n);

// The catalog type the pilot ran on: the first catalog name whose part
// before '-' ("H100" of "H100-80") occurs in the device name; nullptr for
// a CPU or an unknown device.
const GpuType* MeasuredGpuType(const SingleStage& s, const HardwareCatalog& cat);

// FLOPs of one trained token: results' flops_per_token, else 6 N + 12 L d T.
double FlopsPerToken(const SingleStage& s, const Workload& w);

struct ThroughputProjection {
  std::string gpu_type;
  double tokens_per_second = 0;  // per GPU, one process, no communication
  double compute_ms = 0;         // per optimizer step
  double data_wait_ms = 0;       // per optimizer step
  double mfu = 0;                // model FLOP utilisation
  std::string basis;             // the assumption, for people
};

// REQUIRES: s.shape.tokens_per_step > 0.
ThroughputProjection ProjectThroughput(const SingleStage& s, const Workload& w, const GpuType& gpu,
                                       const HardwareCatalog& cat, const Policy& policy);

struct ScalingQuery {
  int nodes = 1;
  int gpus_per_node = 1;
  std::string mode = "ddp";  // "ddp" | "sharded"
  int bucket_mb = 25;
};

struct ScalingEstimate {
  int gpus = 1;
  double step_ms = 0;            // per optimizer step at this scale
  double comm_ms = 0;            // exposed communication per step
  double efficiency = 1;         // step(1) / step(P)
  double tokens_per_second = 0;  // all GPUs together
  std::string basis;             // "analytic ring all-reduce" | "node stage measured at G"
};

ScalingEstimate ProjectScaling(const ThroughputProjection& t, const Workload& w, const GpuType& gpu,
                               const ScalingQuery& q, const Policy& policy,
                               const std::optional<NodeMeasurement>& node = std::nullopt);

// The largest node count in 1..policy.planning.max_nodes whose efficiency
// reaches thresholds.min_scaling_efficiency (1 when none does).
int RecommendNodes(const ThroughputProjection& t, const Workload& w, const GpuType& gpu,
                   ScalingQuery q, const Policy& policy,
                   const std::optional<NodeMeasurement>& node = std::nullopt);

}  // namespace pilot
