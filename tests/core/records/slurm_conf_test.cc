// slurm.conf and plugstack.conf as slurmd reads them: keys, comments,
// includes (relative, globbed, missing), the last value of a key winning.
#include "core/records/slurm_conf.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

using testutil::TempDir;
using testutil::WriteText;

TEST(SlurmConf, KeysCommentsAndIncludes) {
  TempDir dir;
  WriteText(dir / "slurm.conf",
            "# a comment\n"
            "ClusterName=test   # trailing comment\n"
            "prolog=/usr/sbin/old-prolog\n"
            "Include extra.conf\n"
            "PrologFlags=Alloc,Contain\n"
            "NodeName=n1 CPUs=4 RealMemory=1000\n"
            "SlurmctldHost=ctl(10.0.0.1)\n"
            "Epilog=\"/opt/pilot epilog\"\n");
  WriteText(dir / "extra.conf", "Prolog=/usr/sbin/pilot-prolog\nPlugStackConfig=stack.conf\n");
  Result<SlurmConf> c = LoadSlurmConf(dir / "slurm.conf");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->problems.empty()) << c->problems.front();
  // Keys are case-insensitive and the last line wins, the included one here.
  const SlurmConfEntry* prolog = c->Find("PROLOG");
  ASSERT_NE(prolog, nullptr);
  EXPECT_EQ(prolog->value, "/usr/sbin/pilot-prolog");
  EXPECT_EQ(prolog->at.Where(), dir / "extra.conf" + ":1");
  EXPECT_EQ(c->Value("ClusterName"), "test");
  EXPECT_EQ(c->Value("PrologFlags"), "Alloc,Contain");
  EXPECT_EQ(c->Value("NodeName"), "n1");
  EXPECT_EQ(c->Value("SlurmctldHost"), "ctl(10.0.0.1)");
  EXPECT_EQ(c->Value("Epilog"), "/opt/pilot epilog");
  EXPECT_EQ(c->Value("JobSubmitPlugins", "none"), "none");
  // A relative PlugStackConfig is in slurm.conf's folder.
  EXPECT_EQ(PlugstackPath(*c), dir / "stack.conf");
}

TEST(SlurmConf, DefaultsAndProblems) {
  EXPECT_EQ(SlurmConfPath([](const std::string&) { return std::nullopt; }), "/etc/slurm/slurm.conf");
  EXPECT_EQ(SlurmConfPath([](const std::string& k) -> std::optional<std::string> {
              return k == "SLURM_CONF" ? std::optional<std::string>("/x/slurm.conf") : std::nullopt;
            }),
            "/x/slurm.conf");
  SlurmConf c = ParseSlurmConf("Include /nonexistent/pilot.conf\nnot a pair\n\\#Odd=1\n", "/e/slurm.conf");
  ASSERT_EQ(c.problems.size(), 2u);
  EXPECT_NE(c.problems[0].find("/e/slurm.conf:1: Include"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[1].find("/e/slurm.conf:2: expected Key=Value"), std::string::npos);
  EXPECT_EQ(c.Value("#Odd"), "1");  // "\#" is a literal '#'
  // No PlugStackConfig: plugstack.conf beside slurm.conf.
  EXPECT_EQ(PlugstackPath(c), "/e/plugstack.conf");
  EXPECT_EQ(LoadSlurmConf("/nonexistent/slurm.conf").status().code(), Code::kNotFound);
}

TEST(Plugstack, LinesIncludesAndComments) {
  TempDir dir;
  ASSERT_EQ(mkdir((dir / "plugstack.conf.d").c_str(), 0755), 0);
  WriteText(dir / "plugstack.conf",
            "# the stock file\n"
            "optional /usr/lib/slurm/other.so   # another plugin\n"
            "include plugstack.conf.d/*.conf\n"
            "include /nonexistent/*.conf\n"
            "bogus line\n");
  WriteText(dir / "plugstack.conf.d/pilot.conf",
            "# slurm-pilot\n"
            "required spank_pilot.so state_dir=/var/lib/slurm-pilot policy=/etc/p.conf\n");
  WriteText(dir / "plugstack.conf.d/skipped.txt", "required not-read.so\n");
  Result<Plugstack> s = LoadPlugstack(dir / "plugstack.conf");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->entries.size(), 2u);
  EXPECT_FALSE(s->entries[0].required);
  EXPECT_EQ(s->entries[0].plugin, "/usr/lib/slurm/other.so");
  EXPECT_TRUE(s->entries[0].args.empty());
  const PlugstackEntry& pilot = s->entries[1];
  EXPECT_TRUE(pilot.required);
  EXPECT_EQ(pilot.plugin, "spank_pilot.so");
  EXPECT_EQ(pilot.args,
            (std::vector<std::string>{"state_dir=/var/lib/slurm-pilot", "policy=/etc/p.conf"}));
  EXPECT_EQ(pilot.at.Where(), dir / "plugstack.conf.d/pilot.conf" + ":2");
  EXPECT_EQ(s->files, (std::vector<std::string>{dir / "plugstack.conf",
                                                dir / "plugstack.conf.d/pilot.conf"}));
  // A glob that matches nothing is no problem (slurmd's way); a bad line is.
  ASSERT_EQ(s->problems.size(), 1u);
  EXPECT_NE(s->problems[0].find("plugstack.conf:5: expected required|optional"), std::string::npos);
}

TEST(Plugstack, PluginFilePath) {
  TempDir dir;
  WriteText(dir / "spank_pilot.so", "");
  EXPECT_EQ(PluginFilePath("/abs/x.so", "/nowhere"), "/abs/x.so");
  EXPECT_EQ(PluginFilePath("spank_pilot.so", "/nowhere:" + dir.path()), dir / "spank_pilot.so");
  EXPECT_EQ(PluginFilePath("missing.so", "/nowhere:" + dir.path()), "/nowhere/missing.so");
  EXPECT_EQ(LoadPlugstack(dir / "none.conf").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace pilot
