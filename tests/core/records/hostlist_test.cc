// Host list expansion, the rendezvous port and srun's task lines (label
// unit: pure, no torch).
#include <gtest/gtest.h>

#include "core/records/hostlist.h"
#include "core/records/srun_lines.h"

namespace pilot {
namespace {

std::vector<std::string> Expand(const std::string& s) {
  Result<std::vector<std::string>> r = ExpandHostlist(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().ToString();
  return r.ok() ? *r : std::vector<std::string>{};
}

TEST(Hostlist, PlainNames) {
  EXPECT_EQ(Expand("gpu1"), (std::vector<std::string>{"gpu1"}));
  EXPECT_EQ(Expand("a,b,c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Hostlist, RangesKeepPadding) {
  EXPECT_EQ(Expand("node[01-03]"), (std::vector<std::string>{"node01", "node02", "node03"}));
  EXPECT_EQ(Expand("n[8-11]"), (std::vector<std::string>{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(Expand("n[098-101]"), (std::vector<std::string>{"n098", "n099", "n100", "n101"}));
}

TEST(Hostlist, ListsInsideBrackets) {
  EXPECT_EQ(Expand("node[1,3-4,7]"), (std::vector<std::string>{"node1", "node3", "node4", "node7"}));
}

TEST(Hostlist, MixedTopLevel) {
  EXPECT_EQ(Expand("gpu-a[1-2],cpu7,x[2-3]-ib"),
            (std::vector<std::string>{"gpu-a1", "gpu-a2", "cpu7", "x2-ib", "x3-ib"}));
}

TEST(Hostlist, SeveralGroupsMultiply) {
  EXPECT_EQ(Expand("r[1-2]n[1-2]"), (std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"}));
}

TEST(Hostlist, DottedAddresses) {
  EXPECT_EQ(Expand("127.0.0.[1-2]"), (std::vector<std::string>{"127.0.0.1", "127.0.0.2"}));
}

TEST(Hostlist, Errors) {
  for (const char* bad : {"", "node[1-3", "node1-3]", "node[]", "node[3-1]", "node[a-b]", "a,,b", "node[1,]",
                          "n[0-200000]"}) {
    Result<std::vector<std::string>> r = ExpandHostlist(bad);
    EXPECT_FALSE(r.ok()) << "accepted \"" << bad << "\"";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalid) << bad;
    }
  }
}

TEST(Hostlist, PortIsInTheDocumentedRange) {
  EXPECT_EQ(MasterPortForJob(0), kPortBase);
  EXPECT_EQ(MasterPortForJob(1234), kPortBase + 1234);
  EXPECT_EQ(MasterPortForJob(kPortSpan + 7), kPortBase + 7);
  for (uint64_t id : {1ull, 99999ull, 123456789ull, 18446744073709551615ull}) {
    EXPECT_GE(MasterPortForJob(id), kPortBase);
    EXPECT_LT(MasterPortForJob(id), kPortBase + kPortSpan);
  }
}

TEST(SrunLines, TheTasksSrunNamesAndWhy) {
  std::optional<SrunTaskLine> t = ParseSrunTaskLine("srun: error: pn2: task 2: Killed");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->node, "pn2");
  EXPECT_EQ(t->tasks, std::vector<int>({2}));
  EXPECT_EQ(t->what, "Killed");
  t = ParseSrunTaskLine("srun: error: gpu-a01: tasks 0-1,3: Exited with exit code 3\r");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->node, "gpu-a01");
  EXPECT_EQ(t->tasks, std::vector<int>({0, 1, 3}));
  EXPECT_EQ(t->what, "Exited with exit code 3");
  // Anything else is not such a line: a task's own output, srun's other
  // messages, broken or huge task lists.
  for (const char* other : {"pilot: node: rank 2: out of memory", "srun: error: Timed out waiting for job step",
                            "srun: Job step aborted: Waiting up to 62 seconds for job step to finish.",
                            "srun: error: pn2: task : Killed", "srun: error: pn2: tasks 3-1: Killed",
                            "srun: error: pn2: task 2x: Killed", "srun: error: pn2: task 2: ",
                            "srun: error: pn2: tasks 0-2000000: Killed", "srun: error: : task 1: Killed",
                            "xsrun: error: pn2: task 2: Killed"}) {
    EXPECT_FALSE(ParseSrunTaskLine(other).has_value()) << other;
  }
}

}  // namespace
}  // namespace pilot
