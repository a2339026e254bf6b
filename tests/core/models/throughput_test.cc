#include "core/models/throughput.h"

#include <gtest/gtest.h>

namespace pilot {
namespace {

HardwareCatalog Cat() {
  HardwareCatalog c;
  c.gpus = {{"A100-80", 80LL << 30, 2.0, 312, "NVLink 3", 600, "cuda", 2.0, "", "", true},
            {"H100-80", 80LL << 30, 3.35, 989, "NVLink 4", 900, "cuda", 3.0, "", "", true}};
  return c;
}

SingleStage OnA100() {
  SingleStage s;
  s.device = "cuda";
  s.device_name = "NVIDIA A100-SXM4-80GB";
  s.shape.params = 1000000000;
  s.shape.seq_len = 2048;
  s.shape.tokens_per_step = 8192;
  s.tokens_per_second = 8192.0 / 0.5;  // 500 ms a step
  s.timings.step_ms = 500;
  s.timings.data_wait_ms = 50;
  s.flops_per_token = 6e9;
  return s;
}

Workload WThroughput() {
  Workload w;
  w.params = 1000000000;
  w.layers = 24;
  w.d_model = 2048;
  return w;
}

TEST(Throughput, MeasuredTypeIsFoundByFamily) {
  HardwareCatalog c = Cat();
  EXPECT_EQ(MeasuredGpuType(OnA100(), c)->name, "A100-80");
  SingleStage cpu = OnA100();
  cpu.device = "cpu";
  EXPECT_EQ(MeasuredGpuType(cpu, c), nullptr);
}

TEST(Throughput, ScalesComputeByTflopsKeepsDataWait) {
  HardwareCatalog c = Cat();
  Policy p;
  ThroughputProjection same = ProjectThroughput(OnA100(), WThroughput(), c.gpus[0], c, p);
  EXPECT_DOUBLE_EQ(same.compute_ms, 450);
  EXPECT_DOUBLE_EQ(same.data_wait_ms, 50);
  EXPECT_NEAR(same.tokens_per_second, 16384, 1e-9);
  ThroughputProjection h = ProjectThroughput(OnA100(), WThroughput(), c.gpus[1], c, p);
  EXPECT_NEAR(h.compute_ms, 450 * 312.0 / 989, 1e-9);
  EXPECT_DOUBLE_EQ(h.data_wait_ms, 50);
  EXPECT_NEAR(same.mfu, h.mfu, 1e-12);  // the assumption: MFU holds
  EXPECT_NE(h.basis.find("assuming the measured MFU holds"), std::string::npos);
}

TEST(Throughput, CpuPilotUsesAssumedMfu) {
  HardwareCatalog c = Cat();
  Policy p;
  p.planning.assumed_mfu = 0.5;
  SingleStage s = OnA100();
  s.device = "cpu";
  ThroughputProjection t = ProjectThroughput(s, WThroughput(), c.gpus[1], c, p);
  EXPECT_NEAR(t.tokens_per_second, 0.5 * 989e12 / 6e9, 1e-6);
  EXPECT_NEAR(t.mfu, 0.5, 1e-12);
  EXPECT_NE(t.basis.find("assumed MFU of 0.50"), std::string::npos) << t.basis;
}

TEST(Throughput, RingScalingAndRecommendation) {
  HardwareCatalog c = Cat();
  Policy p;
  ThroughputProjection t = ProjectThroughput(OnA100(), WThroughput(), c.gpus[0], c, p);
  ScalingQuery q{1, 1, "ddp", 25};
  EXPECT_DOUBLE_EQ(ProjectScaling(t, WThroughput(), c.gpus[0], q, p).efficiency, 1.0);
  q.gpus_per_node = 8;
  ScalingEstimate one = ProjectScaling(t, WThroughput(), c.gpus[0], q, p);
  // 2 x 7/8 x 4e9 bytes / 600 GB/s + 2 x 7 x 153 buckets x 10 us.
  double comm = 2.0 * 7 / 8 * 4e9 / 600e9 * 1e3 + 2.0 * 7 * 153 * 10e-3;
  EXPECT_NEAR(one.comm_ms, comm, 1e-9);
  EXPECT_NEAR(one.efficiency, 500 / (500 + comm), 1e-12);
  q.nodes = 4;
  ScalingEstimate four = ProjectScaling(t, WThroughput(), c.gpus[0], q, p);
  EXPECT_LT(four.efficiency, one.efficiency);  // 25 GB/s between nodes
  int n = RecommendNodes(t, WThroughput(), c.gpus[0], q, p);
  EXPECT_GE(n, 1);
  q.nodes = n;
  EXPECT_GE(ProjectScaling(t, WThroughput(), c.gpus[0], q, p).efficiency,
            p.thresholds.min_scaling_efficiency);
  if (n < p.planning.max_nodes) {
    q.nodes = n + 1;
    EXPECT_LT(ProjectScaling(t, WThroughput(), c.gpus[0], q, p).efficiency,
              p.thresholds.min_scaling_efficiency);
  }
  // A measured node stage replaces the analytic figure at its size.
  NodeMeasurement m{8, 0, 0.2, 0, std::nullopt};
  q.nodes = 1;
  ScalingEstimate meas = ProjectScaling(t, WThroughput(), c.gpus[0], q, p, m);
  EXPECT_NEAR(meas.efficiency, 0.8, 1e-12);
  // Measured between nodes at 5 GB/s, not the policy's 25: more nodes cost
  // more, and the basis says whose bandwidth it is.
  q.nodes = 4;
  const ScalingEstimate assumed = ProjectScaling(t, WThroughput(), c.gpus[0], q, p, m);
  m.inter_node_gb_per_s = 5.0;
  const ScalingEstimate slow = ProjectScaling(t, WThroughput(), c.gpus[0], q, p, m);
  EXPECT_LT(slow.efficiency, assumed.efficiency);
  EXPECT_NE(slow.basis.find("between nodes 5.00 GB/s"), std::string::npos) << slow.basis;
  q.nodes = 1;
  EXPECT_DOUBLE_EQ(ProjectScaling(t, WThroughput(), c.gpus[0], q, p, m).efficiency, meas.efficiency)
      << "inside a node the link counts";
}

TEST(Throughput, NodeMeasurementFromTheNodeStage) {
  NodeStage n;
  n.status = "ok";
  n.world_size = 8;
  n.ranks.resize(2);
  n.ranks[0].step_ms = 90;
  n.ranks[1].step_ms = 110;
  n.scaling.tokens_per_second_per_rank = 1000;
  n.comm.exposed_fraction = 0.1;
  n.data_stall_ms_per_step = 5;
  std::optional<NodeMeasurement> m = NodeMeasurementFrom(n);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->gpus, 8);
  EXPECT_DOUBLE_EQ(m->comm_exposed_fraction, 0.1);
  EXPECT_DOUBLE_EQ(m->data_wait_fraction, 0.05);
  EXPECT_FALSE(m->inter_node_gb_per_s.has_value());
  // 2 nodes, 100 MB in 10 ms: bus bandwidth 2 x 1/2 x 100e6 / 10e-3 = 10 GB/s.
  n.comm.inter_node = NodeCommLevel{2, 4, 100'000'000, 10.0, 10.0};
  m = NodeMeasurementFrom(n);
  ASSERT_TRUE(m->inter_node_gb_per_s.has_value());
  EXPECT_NEAR(*m->inter_node_gb_per_s, 10.0, 1e-9);
  n.status = "error";
  EXPECT_FALSE(NodeMeasurementFrom(n).has_value());
}

}  // namespace
}  // namespace pilot
