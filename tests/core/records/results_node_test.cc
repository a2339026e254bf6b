// results.json's stages.node: strict reading and the round trip (label
// unit: pure, no torch).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/records/results.h"

namespace pilot {
namespace {

NodeStage SampleResultsNode() {
  NodeStage n;
  n.status = "ok";
  n.world_size = 2;
  n.mode = "sharded";
  n.launcher = "srun";
  n.data_ranks = 2;
  n.steps = 12;
  n.losses = {6.25, 6.5, INFINITY};
  NodeRankStats r;
  r.rank = 1;
  r.node_id = 1;
  r.host = "gpu08";
  r.tokens_per_second = 1234.5;
  r.step_ms = 51.25;
  r.data_wait_ms = 0.5;
  r.comm_total_ms = 4;
  r.comm_exposed_ms = 1.5;
  r.memory = NodeMemoryStats{3, 1 << 20, 2 << 20, std::nullopt, 3 << 20, 1 << 19};
  n.ranks = {r};
  n.scaling = {2469, 1234.5, 1300, 0.95};
  n.comm = {"nccl", 4, 1.5, 0.03, 8, 0, 3, 2, NodeCommLevel{4, 2, 1 << 20, 0.5, 2.1}, NodeCommLevel{2, 4, 1 << 20, 2.5, 0.42}};
  n.data_stall_ms_per_step = 0.5;
  n.memory = {1 << 20, std::nullopt};
  n.checkpoint = {"/ckpt/node/checkpoints/step-000006", 6, 4096, 0.25, 2};
  NodeRestore a;
  a.world_size = 2;
  a.from_world_size = 2;
  a.ran = a.equal = true;
  a.tolerance = 1e-6;
  NodeRestore b = a;
  b.world_size = 1;
  b.equal = false;
  b.max_rel_loss_diff = 0.25;
  b.detail = "losses of the resumed steps differ";
  b.skipped = "optimizer";
  n.restore = {a, b};
  n.failure = NodeFailure{"resume-other", 0, "rank 0 failed (exit 4)"};
  return n;
}

TEST(NodeResults, RoundTrip) {
  Results r;
  r.node = SampleResultsNode();
  const std::string text = ResultsToJson(r);
  Result<Results> back = ParseResults(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->node.has_value());
  EXPECT_EQ(*back->node, *r.node);
  EXPECT_EQ(ResultsToJson(*back), text);
}

// A stage on one node (or a file of an earlier version) has no levels and
// no node count: they are left out, and read back as absent.
TEST(NodeResults, LevelsAndNodesAreLeftOutOnOneNode) {
  Results r;
  r.node = SampleResultsNode();
  r.node->comm.nodes.reset();
  r.node->comm.intra_node.reset();
  r.node->comm.inter_node.reset();
  const std::string text = ResultsToJson(r);
  EXPECT_EQ(text.find("intra_node"), std::string::npos);
  EXPECT_EQ(text.find("\"nodes\""), std::string::npos);
  Result<Results> back = ParseResults(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back->node, *r.node);
}

TEST(NodeResults, NullAndAbsentReadAsNoStage) {
  Results r;
  const std::string text = ResultsToJson(r);
  ASSERT_NE(text.find("\"node\": null"), std::string::npos);
  Result<Results> back = ParseResults(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->node.has_value());
  std::string old = text;
  old.erase(old.find(",\n    \"node\": null"), std::string(",\n    \"node\": null").size());
  back = ParseResults(old);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << old;
  EXPECT_FALSE(back->node.has_value());
}

TEST(NodeResults, StrictInsideTheStage) {
  Results r;
  r.node = SampleResultsNode();
  std::string text = ResultsToJson(r);
  const std::string key = "\"data_stall_ms_per_step\"";
  std::string extra = text;
  extra.insert(extra.find(key), "\"surprise\": 1, ");
  Result<Results> bad = ParseResults(extra);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("stages.node.surprise"), std::string::npos) << bad.status().ToString();
  std::string wrong = text;
  wrong.replace(wrong.find("\"world_size\": 2"), std::string("\"world_size\": 2").size(), "\"world_size\": \"2\"");
  bad = ParseResults(wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("stages.node.world_size"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace pilot
