// One decision of where and how a node-stage phase's ranks start, for the
// builtin runner and a user's program: the kind, the ranks, the nodes, the
// processes the launching side starts itself.
#include "launch/layout.h"

#include <gtest/gtest.h>

#include "launch/launcher.h"

namespace pilot::launch {
namespace {

LayoutRequest Builtin(const std::string& launcher) {
  LayoutRequest r;
  r.launcher = launcher;
  return r;
}

LayoutRequest Program(const std::string& launcher, std::vector<std::string> hosts = {}) {
  LayoutRequest r;
  r.launcher = launcher;
  r.program = true;
  r.hosts = std::move(hosts);
  return r;
}

TEST(DecideNodeLayout, BuiltinAutoIsSrunOverTheJobsNodesInAJob) {
  LayoutRequest r = Builtin("auto");
  r.in_slurm_job = true;
  r.job_nodes = 2;
  r.cuda = true;
  r.visible_gpus = 4;
  const NodeLayout l = DecideNodeLayout(r);
  EXPECT_EQ(l.kind, kSrun);
  EXPECT_EQ(l.nodes, 2);
  EXPECT_EQ(l.world, 8);  // one rank per GPU of each node
  EXPECT_EQ(l.data_ranks, 8);
  EXPECT_EQ(l.processes, 1);  // one srun step
}

TEST(DecideNodeLayout, BuiltinNprocOverrideRunsLocallyAndKeepsTheDataRanks) {
  LayoutRequest r = Builtin("auto");
  r.in_slurm_job = true;
  r.job_nodes = 1;
  r.nproc = 4;
  r.world_override = 2;
  const NodeLayout l = DecideNodeLayout(r);
  EXPECT_EQ(l.kind, kLocal);
  EXPECT_EQ(l.world, 2);
  EXPECT_EQ(l.data_ranks, 4);
  EXPECT_EQ(l.processes, 2);
  EXPECT_EQ(l.nodes, 1);
}

TEST(DecideNodeLayout, BuiltinOnACpuOutsideAJobIsTwoLocalRanks) {
  const NodeLayout l = DecideNodeLayout(Builtin("auto"));
  EXPECT_EQ(l.kind, kLocal);
  EXPECT_EQ(l.world, 2);
  EXPECT_EQ(l.processes, 2);
  LayoutRequest r = Builtin("srun");
  r.tasks_per_node = 3;  // a CPU job's tasks per node, srun's one node
  const NodeLayout s = DecideNodeLayout(r);
  EXPECT_EQ(s.kind, kSrun);
  EXPECT_EQ(s.world, 3);
  EXPECT_EQ(s.nodes, 1);
}

TEST(DecideNodeLayout, ProgramOnOneNodeIsOneProcessPerRank) {
  LayoutRequest r = Program("pilot", {"n1"});
  r.cuda = true;
  r.visible_gpus = 2;
  const NodeLayout l = DecideNodeLayout(r);
  EXPECT_EQ(l.kind, kLocal);
  EXPECT_EQ(l.world, 2);
  EXPECT_EQ(l.processes, 2);
  EXPECT_EQ(l.local_world, 2);
  EXPECT_FALSE(l.AcrossNodes());
}

TEST(DecideNodeLayout, ProgramAcrossNodesIsOneSrunStep) {
  LayoutRequest r = Program("pilot", {"n1", "n2"});
  r.tasks_per_node = 2;
  const NodeLayout l = DecideNodeLayout(r);
  EXPECT_EQ(l.kind, kSrun);
  EXPECT_EQ(l.world, 4);
  EXPECT_EQ(l.nodes, 2);
  EXPECT_EQ(l.local_world, 2);
  EXPECT_EQ(l.processes, 1);
  EXPECT_TRUE(l.AcrossNodes());
  EXPECT_FALSE(l.Uneven());
  r.nproc = 3;
  EXPECT_TRUE(DecideNodeLayout(r).Uneven());
}

TEST(DecideNodeLayout, ProgramThatStartsItsOwnWorkersStaysOnThisNode) {
  LayoutRequest r = Program("none", {"n1", "n2"});
  r.nproc = 4;
  r.world_override = 2;  // the builtin's alone
  const NodeLayout l = DecideNodeLayout(r);
  EXPECT_EQ(l.kind, kProgramLauncher);
  EXPECT_EQ(l.world, 4);
  EXPECT_EQ(l.processes, 1);
  EXPECT_EQ(l.nodes, 1);
  EXPECT_FALSE(l.AcrossNodes());
  const NodeLayout one = OneRankLayout(l);
  EXPECT_EQ(one.kind, kProgramLauncher);
  EXPECT_EQ(one.world, 1);
  EXPECT_EQ(OneRankLayout(DecideNodeLayout(Program("pilot"))).kind, kLocal);
}

}  // namespace
}  // namespace pilot::launch
