// The work folder's check across nodes without a cluster: the nodes srun
// names as failed, and finding srun in the workload's PATH. The check
// itself runs in every pilot of tests/slurm/multinode.sh.
#include "supervisor/work_on_nodes.h"

#include <gtest/gtest.h>

namespace pilot::supervisor {
namespace {

TEST(WorkOnNodes, TheNodesSrunNamesEachOnce) {
  const std::string err =
      "srun: error: pn3: task 2: Exited with exit code 1\n"
      "srun: launch/slurm: _step_signal: Terminating StepId=7.1\n"
      "srun: error: pn2: tasks 1,3: Exited with exit code 1\n"
      "srun: error: pn3: task 4: Exited with exit code 1";
  EXPECT_EQ(FailedNodesOf(err), std::vector<std::string>({"pn3", "pn2"}));
  EXPECT_TRUE(FailedNodesOf("srun: error: Unable to create step for job 7\n").empty());
  EXPECT_TRUE(FailedNodesOf("").empty());
}

TEST(WorkOnNodes, SrunIsLookedUpInTheWorkloadsPath) {
  EXPECT_EQ(FindInPath({"PATH=relative:/nonexistent:/bin"}, "sh"), "/bin/sh");
  EXPECT_EQ(FindInPath({"PATH=/nonexistent"}, "sh"), "");
  EXPECT_EQ(FindInPath({}, "sh"), "");
}

TEST(WorkOnNodes, OneNodeNeedsNoCheck) {
  std::vector<std::string> said;
  WorkOnNodesInput in;
  in.hosts = {"pn1"};
  in.work = "/nonexistent";
  EXPECT_FALSE(WorkFolderMissing(in, [&](const std::string& s) { said.push_back(s); }).has_value());
  EXPECT_TRUE(said.empty());
  // Without srun the node stage goes on and shows what is wrong itself.
  in.hosts = {"pn1", "pn2"};
  in.env = {"PATH=/nonexistent"};
  EXPECT_FALSE(WorkFolderMissing(in, [&](const std::string& s) { said.push_back(s); }).has_value());
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "cannot check the work folder on every node: no srun in PATH /nonexistent");
}

}  // namespace
}  // namespace pilot::supervisor
