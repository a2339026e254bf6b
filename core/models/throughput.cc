#include "core/models/throughput.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pilot {
namespace {

// v with `digits` decimals (digits < 0: 2 significant digits).
std::string Fixed(double v, int digits) {
  char buf[64];
  if (digits < 0) {
    std::snprintf(buf, sizeof buf, "%.2g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  }
  return buf;
}

// Exposed ring communication per optimizer step, milliseconds.
double RingMs(const Workload& w, const GpuType& gpu, const ScalingQuery& q, const Policy& p,
              std::optional<double> inter_node_gb = std::nullopt) {
  const int gpus = std::max(1, q.nodes) * std::max(1, q.gpus_per_node);
  if (gpus <= 1) return 0;
  const double bytes = 4.0 * static_cast<double>(w.params);
  const double network = inter_node_gb && *inter_node_gb > 0 ? *inter_node_gb : p.planning.network_gb_per_s;
  double bw_gb = gpu.link_gb_per_s > 0 ? gpu.link_gb_per_s : network;
  if (q.nodes > 1) bw_gb = std::min(bw_gb, network);
  const double buckets = std::max(1.0, std::ceil(bytes / (std::max(1, q.bucket_mb) * 1048576.0)));
  double ms = 2.0 * (gpus - 1) / gpus * bytes / (bw_gb * 1e9) * 1e3 +
              2.0 * (gpus - 1) * buckets * p.planning.network_latency_us * 1e-3;
  if (q.mode == "sharded") ms *= 1.5;
  return ms;
}

}  // namespace

std::optional<NodeMeasurement> NodeMeasurementFrom(const NodeStage& n) {
  if (n.status != "ok" || n.world_size < 2 || n.ranks.empty()) return std::nullopt;
  double step_ms = 0;
  for (const NodeRankStats& r : n.ranks) step_ms += r.step_ms;
  step_ms /= static_cast<double>(n.ranks.size());
  if (step_ms <= 0) return std::nullopt;
  NodeMeasurement m;
  m.gpus = n.world_size;
  m.tokens_per_second_per_gpu = n.scaling.tokens_per_second_per_rank;
  m.comm_exposed_fraction = std::clamp(n.comm.exposed_fraction, 0.0, 0.95);
  m.data_wait_fraction = std::clamp(n.data_stall_ms_per_step / step_ms, 0.0, 1.0);
  if (const std::optional<NodeCommLevel>& l = n.comm.inter_node; l && l->group_size > 1 && l->allreduce_ms > 0) {
    const double g = l->group_size;
    m.inter_node_gb_per_s = 2.0 * (g - 1) / g * static_cast<double>(l->bytes) / (l->allreduce_ms * 1e6);
  }
  return m;
}

const GpuType* MeasuredGpuType(const SingleStage& s, const HardwareCatalog& cat) {
  if (s.device != "cuda") return nullptr;
  return GpuTypeOfDevice(cat, s.device_name);
}

double FlopsPerToken(const SingleStage& s, const Workload& w) {
  if (s.flops_per_token > 0) return s.flops_per_token;
  return 6.0 * static_cast<double>(w.params) +
         12.0 * w.layers * static_cast<double>(w.d_model) * s.shape.seq_len;
}

ThroughputProjection ProjectThroughput(const SingleStage& s, const Workload& w, const GpuType& gpu,
                                       const HardwareCatalog& cat, const Policy& policy) {
  ThroughputProjection t;
  t.gpu_type = gpu.name;
  const double tokens = static_cast<double>(std::max<int64_t>(1, s.shape.tokens_per_step));
  const double fpt = FlopsPerToken(s, w);
  const GpuType* measured = MeasuredGpuType(s, cat);
  if (measured != nullptr && s.tokens_per_second > 0 && measured->bf16_tflops > 0) {
    const double step_ms =
        s.timings.step_ms > 0 ? s.timings.step_ms : tokens / s.tokens_per_second * 1e3;
    const double wait = std::clamp(s.timings.data_wait_ms, 0.0, step_ms);
    const double ratio = gpu.bf16_tflops / measured->bf16_tflops;
    t.compute_ms = (step_ms - wait) / ratio;
    t.data_wait_ms = wait;
    t.basis = "measured on " + measured->name +
              (measured == &gpu ? ""
                                : ", scaled by BF16 TFLOP/s " + Fixed(gpu.bf16_tflops, 0) + "/" +
                                      Fixed(measured->bf16_tflops, 0)) +
              ", assuming the measured MFU holds";
  } else {
    const double peak = gpu.bf16_tflops * 1e12;
    const double tok_s = fpt > 0 ? policy.planning.assumed_mfu * peak / fpt : 0;
    t.compute_ms = tok_s > 0 ? tokens / tok_s * 1e3 : 0;
    t.data_wait_ms = 0;
    t.basis = "no GPU measurement (pilot on " + (s.device.empty() ? std::string("?") : s.device) +
              "): " + Fixed(fpt, -1) + " FLOPs/token at an assumed MFU of " +
              Fixed(policy.planning.assumed_mfu, 2);
  }
  const double total_ms = t.compute_ms + t.data_wait_ms;
  t.tokens_per_second = total_ms > 0 ? tokens / total_ms * 1e3 : 0;
  t.mfu = gpu.bf16_tflops > 0 && t.compute_ms > 0
              ? tokens / t.compute_ms * 1e3 * fpt / (gpu.bf16_tflops * 1e12)
              : 0;
  return t;
}

ScalingEstimate ProjectScaling(const ThroughputProjection& t, const Workload& w, const GpuType& gpu,
                               const ScalingQuery& q, const Policy& policy,
                               const std::optional<NodeMeasurement>& node) {
  ScalingEstimate e;
  e.gpus = std::max(1, q.nodes) * std::max(1, q.gpus_per_node);
  const double step1 = t.compute_ms + t.data_wait_ms;
  const std::optional<double> inter = node ? node->inter_node_gb_per_s : std::nullopt;
  double comm = RingMs(w, gpu, q, policy, inter);
  e.basis = "analytic ring all-reduce, no overlap";
  if (node && node->gpus > 1 && node->comm_exposed_fraction >= 0) {
    ScalingQuery at = q;
    at.nodes = 1;
    at.gpus_per_node = node->gpus;
    const double analytic_at = RingMs(w, gpu, at, policy);
    const double measured_at =
        node->comm_exposed_fraction * step1 / std::max(1e-9, 1.0 - node->comm_exposed_fraction);
    comm = analytic_at > 0 ? measured_at * comm / analytic_at : measured_at;
    e.basis =
        "node stage measured at " + std::to_string(node->gpus) + " GPUs, scaled by ring model";
  }
  if (inter && *inter > 0 && q.nodes > 1) {
    e.basis += "; between nodes " + Fixed(*inter, 2) + " GB/s, the node stage's all-reduce across its nodes";
  }
  e.comm_ms = comm;
  e.step_ms = step1 + comm;
  e.efficiency = e.step_ms > 0 ? step1 / e.step_ms : 0;
  e.tokens_per_second = t.tokens_per_second * e.gpus * e.efficiency;
  return e;
}

int RecommendNodes(const ThroughputProjection& t, const Workload& w, const GpuType& gpu,
                   ScalingQuery q, const Policy& policy,
                   const std::optional<NodeMeasurement>& node) {
  int best = 1;
  for (int n = 1; n <= policy.planning.max_nodes; ++n) {
    q.nodes = n;
    if (ProjectScaling(t, w, gpu, q, policy, node).efficiency >=
        policy.thresholds.min_scaling_efficiency) {
      best = n;
    }
  }
  return best;
}

}  // namespace pilot
