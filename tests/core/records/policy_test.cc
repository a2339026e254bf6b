#include "core/records/policy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/records/record.h"
#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

const std::string kSrcPolicy = PILOT_SOURCE_DIR;

TEST(Policy, EmptyFileGivesDefaults) {
  auto p = ParsePolicy("", "pilot.conf");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->state_dir, "/var/lib/slurm-pilot");
  EXPECT_EQ(p->key_file, "/etc/slurm-pilot/verdict.key");
  EXPECT_EQ(p->notify_url, "");
  EXPECT_EQ(p->notify_retries, 3);
  EXPECT_DOUBLE_EQ(p->thresholds.memory_headroom, 0.10);
  EXPECT_EQ(p->thresholds.verdict_lifetime_days, 14);
  EXPECT_EQ(p->thresholds.max_unpiloted_days, 7);
  EXPECT_DOUBLE_EQ(p->thresholds.budget_buffer, 0.15);
  EXPECT_NE(p->hardware_catalog.find("/hardware.toml"), std::string::npos);
}

TEST(Policy, ShippedFileIsTheDefaults) {
  auto p = LoadPolicy(kSrcPolicy + "/etc/pilot.conf");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Policy d = DefaultPolicy();
  EXPECT_EQ(p->state_dir, d.state_dir);
  EXPECT_EQ(p->thresholds.min_pilot_steps, d.thresholds.min_pilot_steps);
  EXPECT_EQ(p->registry.retries, d.registry.retries);
}

// The shipped file, uncommented, is a valid policy that sets every key.
TEST(Policy, ShippedFileUncommentedSetsEveryKey) {
  std::string text = testutil::ReadText(kSrcPolicy + "/etc/pilot.conf");
  std::string out;
  size_t pos = 0;
  int set = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.rfind("#", 0) == 0 && line.size() > 1 && line[1] != ' ' &&
        line.find(" = ") != std::string::npos) {
      line = line.substr(1);
      ++set;
    }
    out += line + "\n";
  }
  auto p = ParsePolicy(out, "pilot.conf");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(set, static_cast<int>(KnownPolicyKeys().size()));
  EXPECT_EQ(p->registry.insecure, std::vector<std::string>{"127.0.0.1:5000"});
}

TEST(Policy, EveryKeyIsDocumented) {
  std::string man = testutil::ReadText(kSrcPolicy + "/man/pilot.conf.5");
  std::string conf = testutil::ReadText(kSrcPolicy + "/etc/pilot.conf");
  ASSERT_FALSE(man.empty());
  for (const auto& key : KnownPolicyKeys()) {
    std::string leaf = key.substr(key.find('.') == std::string::npos ? 0 : key.find('.') + 1);
    // roff escapes '-' as '\-'; keys use '_' only.
    EXPECT_NE(man.find(leaf), std::string::npos) << key << " missing from pilot.conf(5)";
    EXPECT_NE(conf.find("#" + leaf + " = "), std::string::npos)
        << key << " missing from etc/pilot.conf";
  }
}

TEST(Policy, EveryKeyOfTheTableHasAHint) {
  ASSERT_EQ(PolicyKeys().size(), KnownPolicyKeys().size());
  EXPECT_EQ(PolicyKeys().front().name, "state_dir");
  EXPECT_EQ(PolicyKeys().back().name, "container.image_cache");
  for (const RecordKey& key : PolicyKeys()) EXPECT_FALSE(key.doc.empty()) << key.name;
}

TEST(Policy, ReadsValues) {
  auto p = ParsePolicy(R"(state_dir = "/srv/pilot"
notify_url = "https://verdicts.example.org/hook"
notify_retries = 5
[thresholds]
memory_headroom = 0.2
min_pilot_steps = 40
[registry]
insecure = ["127.0.0.1:5000", "registry.local:80"]
timeout_seconds = 3
)",
                       "pilot.conf");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->state_dir, "/srv/pilot");
  EXPECT_EQ(p->notify_retries, 5);
  EXPECT_DOUBLE_EQ(p->thresholds.memory_headroom, 0.2);
  EXPECT_EQ(p->thresholds.min_pilot_steps, 40);
  EXPECT_EQ(p->registry.insecure.size(), 2u);
  EXPECT_EQ(p->registry.timeout_seconds, 3);
}

struct BadCasePolicy {
  std::string text;
  std::string message;
};

TEST(Policy, StrictErrorsWithLine) {
  const BadCasePolicy cases[] = {
      {"state_dr = \"/x\"\n",
       "pilot: pilot.conf:1: state_dr: unknown key\nHINT: did you mean state_dir?"},
      {"[thresholds]\nmemory_headrom = 0.1\n",
       "pilot: pilot.conf:2: thresholds.memory_headrom: unknown key\nHINT: did you mean "
       "thresholds.memory_headroom?"},
      {"[limits]\nx = 1\n", "pilot: pilot.conf:1: limits: unknown section"},
      {"\nnotify_retries = \"3\"\n",
       "pilot: pilot.conf:2: notify_retries: expected an integer, got a string"},
      {"notify_retries = 11\n",
       "pilot: pilot.conf:1: notify_retries: must be between 0 and 10, got 11"},
      {"[thresholds]\nmemory_headroom = 1.5\n",
       "pilot: pilot.conf:2: thresholds.memory_headroom: must be between 0 and 0.9, got 1.5"},
      {"state_dir = \"relative\"\n", "pilot: pilot.conf:1: state_dir: must be an absolute path"},
      {"notify_url = \"ftp://x\"\n",
       "pilot: pilot.conf:1: notify_url: must start with http:// or https://"},
      {"[registry]\ninsecure = \"127.0.0.1:5000\"\n",
       "pilot: pilot.conf:2: registry.insecure: expected an array of strings, got a string"},
      {"[registry]\ninsecure = [1]\n",
       "pilot: pilot.conf:2: registry.insecure: element 0: expected a string, got an integer"},
      {"thresholds = 3\n", "pilot: pilot.conf:1: thresholds: expected a table, got an integer"},
  };
  for (const auto& c : cases) {
    auto p = ParsePolicy(c.text, "pilot.conf");
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), Code::kInvalid);
    EXPECT_EQ(p.status().ToString(), c.message) << c.text;
  }
}

TEST(Policy, SyntaxErrorsAndDuplicates) {
  auto dup = ParsePolicy("notify_retries = 1\nnotify_retries = 2\n", "p.conf");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().ToString().rfind("pilot: p.conf:2: syntax error: ", 0), 0u)
      << dup.status().ToString();
  auto junk = ParsePolicy("state_dir = \n", "p.conf");
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().ToString().rfind("pilot: p.conf:1: syntax error: ", 0), 0u);
  auto bytes = ParsePolicy(std::string("\x01\xff\xfe", 3), "p.conf");
  EXPECT_FALSE(bytes.ok());
}

TEST(Policy, MissingFile) {
  testutil::TempDir dir;
  EXPECT_EQ(LoadPolicy(dir / "none").status().code(), Code::kNotFound);
  auto d = LoadPolicy(dir / "none", /*missing_ok=*/true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->path, "");
}

TEST(Policy, RunnerPath) {
  Policy p;
  p.runner_path = "/opt/pilot/bin/pilot-runner";
  EXPECT_EQ(ResolveRunnerPath(p), "/opt/pilot/bin/pilot-runner");
  p.runner_path = "";
  std::string r = ResolveRunnerPath(p);
  EXPECT_EQ(r.substr(r.size() - 13), "/pilot-runner");
  // No runner beside this test program: the installation's bindir, as for
  // a packaged pilot-epilog in sbindir whose runner is in bindir.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string beside = self.substr(0, self.rfind('/')) + "/pilot-runner";
  if (!std::filesystem::exists(beside)) {
    EXPECT_NE(r, beside);
    EXPECT_EQ(r.front(), '/');
  }
}

}  // namespace
}  // namespace pilot
