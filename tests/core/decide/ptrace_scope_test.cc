// The verdict's ptrace_scope check (core/decide/ptrace_check.h): a node
// below 1, or without Yama, is named with what it means and fails unless the
// site's require_ptrace_scope is false; 1 and above pass; without the
// supervisor's record there is no check. decide_test.cc shows what it does
// to a whole verdict.
#include "core/decide/ptrace_check.h"

#include <gtest/gtest.h>

#include <string>

namespace pilot {
namespace {

Results WithScope(int scope) {
  Results r;
  r.supervisor.emplace();
  r.supervisor->ptrace_scope = scope;
  return r;
}

// Proves: 1, 2 and 3 pass, as the supervisor's word.
TEST(PtraceScopeCheck, OneAndAbovePass) {
  for (int scope : {1, 2, 3}) {
    Results r = WithScope(scope);
    std::optional<Check> c = PtraceScopeCheck(&r, Policy{});
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->name, "ptrace_scope");
    EXPECT_EQ(c->status, CheckStatus::kPass) << scope;
    EXPECT_EQ(c->measured, "kernel.yama.ptrace_scope = " + std::to_string(scope));
    EXPECT_EQ(c->verified_by, VerifiedBy::kSupervisor);
  }
}

// Proves: 0 and "no Yama" (-1) fail under the default policy, and the
// detail says what the setting allows and what to do.
TEST(PtraceScopeCheck, ZeroAndNoYamaFailByDefault) {
  for (int scope : {0, -1}) {
    Results r = WithScope(scope);
    std::optional<Check> c = PtraceScopeCheck(&r, Policy{});
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->status, CheckStatus::kFail) << scope;
    EXPECT_NE(c->detail.find("attach to the workload"), std::string::npos) << c->detail;
    EXPECT_NE(c->detail.find("kernel.yama.ptrace_scope = 1"), std::string::npos) << c->detail;
    EXPECT_NE(c->detail.find("require_ptrace_scope"), std::string::npos) << c->detail;
  }
  Results none = WithScope(-1);
  EXPECT_EQ(PtraceScopeCheck(&none, Policy{})->measured,
            "no Yama (kernel.yama.ptrace_scope absent)");
}

// Proves: require_ptrace_scope = false names the node with a warning.
TEST(PtraceScopeCheck, SitePolicyTurnsTheFailIntoAWarning) {
  Policy p;
  p.require_ptrace_scope = false;
  Results r = WithScope(0);
  std::optional<Check> c = PtraceScopeCheck(&r, p);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, CheckStatus::kWarn);
  EXPECT_EQ(c->measured, "kernel.yama.ptrace_scope = 0");
}

// Proves: nothing is claimed when no supervisor read the node.
TEST(PtraceScopeCheck, NoCheckWithoutTheSupervisorsRecord) {
  EXPECT_FALSE(PtraceScopeCheck(nullptr, Policy{}).has_value());
  Results by_hand;
  EXPECT_FALSE(PtraceScopeCheck(&by_hand, Policy{}).has_value());
}

// Proves: pilot.conf reads the key, and the default is true.
TEST(PtraceScopeCheck, PolicyKeyDefaultsToRequired) {
  EXPECT_TRUE(Policy{}.require_ptrace_scope);
  Result<Policy> p = ParsePolicy("require_ptrace_scope = false\n", "pilot.conf");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->require_ptrace_scope);
  EXPECT_FALSE(ParsePolicy("require_ptrace_scope = 1\n", "pilot.conf").ok());
}

}  // namespace
}  // namespace pilot
