// pilot.toml's [container] runtime and mounts: what a program in an image
// may ask for, and the message (file:line) for what it may not.
#include <gtest/gtest.h>

#include "core/config/config.h"
#include "core/config/load.h"
#include "core/config/mounts.h"

namespace pilot {
namespace {

const std::string kProgram =
    "[run]\nname = \"t\"\nseq_len = 128\nmicro_batch = 2\ntarget_steps = 100\n"
    "[program]\ncommand = [\"python3\", \"train.py\"]\nworkdir = \"/w\"\n"
    "[training]\nsteps = 10\n";
constexpr char kImage[] =
    "reg.io/t/torch@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

Result<Config> Parse(const std::string& text) {
  LoadOptions o;
  o.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  o.base_dir = "/cfg";
  return ParseConfig(text, "c.toml", o);
}

TEST(ConfigContainer, RuntimeAndMountsAreRead) {
  Result<Config> c =
      Parse(kProgram + "[container]\nimage = \"" + kImage +
            "\"\nruntime = \"podman\"\nmounts = [\"/data\", \"/scratch/u:/scratch:ro\"]\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->container.runtime, "podman");
  EXPECT_EQ(c->container.mounts.size(), 2u);
  Result<Config> d = Parse(kProgram);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->container.runtime, "none");
  EXPECT_TRUE(d->container.mounts.empty());
}

TEST(ConfigContainer, BadInputNamesFileAndLine) {
  struct Case {
    std::string tail;
    std::string want;
  } cases[] = {
      {"[container]\nimage = \"a/b:1\"\nruntime = \"docker\"\n", "c.toml:13: container.runtime"},
      {"[container]\nimage = \"a/b:1\"\nruntime = \"podman\"\nmounts = [\"data\"]\n",
       "c.toml:14: container.mounts"},
      {"[container]\nimage = \"a/b:1\"\nruntime = \"podman\"\nmounts = [\"/a,b\"]\n", "','"},
      {"[container]\nimage = \"a/b:1\"\nruntime = \"podman\"\nmounts = [\"/a:/b:/c:ro\"]\n",
       "three"},
      {"[container]\nimage = \"a/b:1\"\nruntime = \"podman\"\nmounts = [\"/a/../etc\"]\n", "'..'"},
      {"[container]\nimage = \"a/b:1\"\nmounts = [\"/a\"]\n", "binds need a runtime"},
      {"[container]\nruntime = \"podman\"\n", "needs container.image"},
      {"[container]\nimage = \"/images/x.sqsh\"\nruntime = \"podman\"\n", "registry image"},
      {"[container]\nimage = \"/images/x.sqsh\"\nruntime = \"apptainer\"\n", ".sif"},
  };
  for (const Case& k : cases) {
    Result<Config> c = Parse(kProgram + k.tail);
    ASSERT_FALSE(c.ok()) << k.tail;
    EXPECT_NE(c.status().ToString().find(k.want), std::string::npos)
        << k.tail << " -> " << c.status().ToString();
  }
}

TEST(ConfigContainer, TheBuiltinModelRunsInNoContainer) {
  Result<Config> c = Parse(
      "[run]\nname = \"t\"\nseq_len = 128\nmicro_batch = 2\ntarget_steps = 100\n"
      "[container]\nimage = \"a/b:1\"\nruntime = \"podman\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("[program]"), std::string::npos) << c.status().ToString();
}

TEST(Mounts, ParseAndAllow) {
  EXPECT_EQ(*ParseMount("/data"), (Mount{"/data", "/data", false}));
  EXPECT_EQ(*ParseMount("/a:/b"), (Mount{"/a", "/b", false}));
  EXPECT_EQ(*ParseMount("/a:/b:ro"), (Mount{"/a", "/b", true}));
  for (const char* bad :
       {"", "a", "/a:", "/a:/b:rx", "/a//b", "/a/", "/a/./b", "/a\nb", "/a:/b,c"}) {
    EXPECT_FALSE(ParseMount(bad).ok()) << bad;
  }
  EXPECT_TRUE(MountSourceAllowed("/data/x", {"/data"}));
  EXPECT_TRUE(MountSourceAllowed("/data", {"/data"}));
  EXPECT_FALSE(MountSourceAllowed("/database", {"/data"}));
  EXPECT_FALSE(MountSourceAllowed("/etc", {}));
  EXPECT_TRUE(MountSourceAllowed("/etc", {"/"}));
}

}  // namespace
}  // namespace pilot
