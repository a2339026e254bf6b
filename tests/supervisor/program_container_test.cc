// supervisor/program/container.h: when a program may run in its image, the
// binds every process gets, and one process's command wrapped in podman's.
#include <gtest/gtest.h>

#include <algorithm>

#include "supervisor/program/container.h"

namespace pilot::supervisor {
namespace {

constexpr char kDigest[] =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct Fixture {
  Config cfg;
  Lock lock;
  Policy policy;
  Fixture() {
    cfg.program.command = {"python3", "train.py"};
    cfg.container.image = "reg.io/t/torch:1";
    cfg.container.runtime = "podman";
    lock.container.method = "registry";
    lock.container.digest = kDigest;
    lock.container.pinned = std::string("reg.io/t/torch@") + kDigest;
    policy.container.allowed_runtimes = {"none", "podman"};
    policy.container.allowed_mounts = {"/data"};
  }
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ProgramContainer, ProblemsAreSentencesNamingTheSetting) {
  Fixture f;
  EXPECT_EQ(ContainerProblem(f.cfg, f.lock, f.policy), "");
  f.cfg.container.mounts = {"/data/set:/set:ro"};
  EXPECT_EQ(ContainerProblem(f.cfg, f.lock, f.policy), "");
  f.cfg.container.mounts = {"/etc"};
  EXPECT_NE(ContainerProblem(f.cfg, f.lock, f.policy).find("allowed_mounts"),
            std::string::npos);
  f.cfg.container.mounts.clear();
  Fixture g;
  g.policy.container.allowed_runtimes = {"none"};
  EXPECT_NE(ContainerProblem(g.cfg, g.lock, g.policy).find("not allowed"),
            std::string::npos);
  Fixture h;
  h.cfg.container.runtime = "apptainer";
  h.policy.container.allowed_runtimes = {"apptainer"};
  EXPECT_NE(ContainerProblem(h.cfg, h.lock, h.policy).find("podman only"),
            std::string::npos);
  Fixture k;
  k.lock.container.method = "none";
  k.lock.container.pinned.clear();
  EXPECT_NE(ContainerProblem(k.cfg, k.lock, k.policy).find("not pinned"), std::string::npos);
  Fixture n;
  n.cfg.container.runtime = "none";
  n.policy.container.allowed_runtimes = {"none"};
  EXPECT_EQ(ContainerProblem(n.cfg, n.lock, n.policy), "");
}

TEST(ProgramContainer, MountsOncePerPlace) {
  Fixture f;
  f.cfg.container.mounts = {"/data/set:/set:ro", "/w"};
  const std::vector<Mount> m = ContainerMounts({"/w", "/w/metrics", "", "/", "/w"}, f.cfg);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0], (Mount{"/w", "/w", false}));
  EXPECT_EQ(m[1], (Mount{"/w/metrics", "/w/metrics", false}));
  EXPECT_EQ(m[2], (Mount{"/data/set", "/set", true}));
}

TEST(ProgramContainer, WrapsOneProcessInPodman) {
  Fixture f;
  ContainerSetup s;
  s.runtime = "podman";
  s.image = f.lock.container.pinned;
  s.mounts = {{"/w", "/w", false}};
  s.gpus = {"2", "5"};
  s.site = &f.policy.container;
  s.run_as = job::RunAs{1000, 100, "alice"};
  s.workdir = "/w";
  RankLaunch r;
  r.argv = {"python3", "train.py"};
  r.env = {"PATH=/home/alice/bin:/usr/bin", "LD_PRELOAD=/x.so", "PILOT_STAGE=single",
           "CUDA_VISIBLE_DEVICES=2,5", "HOME=/home/alice"};
  ASSERT_TRUE(WrapInContainer(s, "pilot-7-single-reference-0", &r).ok());
  EXPECT_TRUE(r.as_root);
  EXPECT_TRUE(Has(r.argv, "--user=1000:100"));
  EXPECT_TRUE(Has(r.argv, std::string("reg.io/t/torch@") + kDigest));
  EXPECT_TRUE(Has(r.argv, "--device=nvidia.com/gpu=2"));
  EXPECT_TRUE(Has(r.argv, "--device=nvidia.com/gpu=5"));
  EXPECT_EQ(r.argv.back(), "train.py");
  // The node's PATH, HOME and LD_* stay outside; podman runs with root's.
  EXPECT_FALSE(Has(r.argv, "LD_PRELOAD=/x.so"));
  EXPECT_FALSE(Has(r.env, "LD_PRELOAD=/x.so"));
  EXPECT_FALSE(Has(r.env, "PATH=/home/alice/bin:/usr/bin"));
  EXPECT_TRUE(Has(r.env, "PILOT_STAGE=single"));
  EXPECT_TRUE(Has(r.env, "CUDA_VISIBLE_DEVICES=0,1"));
}

// Proves: an image that never started (podman's own exit status 125, as
// a pull of a digest the registry does not have) is named by podman's last
// "Error:" line and the process that hit it; a program's own exit status
// (1, or a signal) is not taken for podman's.
TEST(ProgramContainer, StartFailureNamesWhatPodmanSaid) {
  ProgramProcess ok;
  ok.stage = "single";
  ok.process = "reference";
  ok.exit_code = 1;
  ok.stderr_tail = "Error: the program's own\n";
  ProgramProcess pull = ok;
  pull.rank = 1;
  pull.exit_code = 125;
  pull.stderr_tail =
      "Trying to pull reg.io/t/torch@sha256:00...\n"
      "Error: initializing source docker://reg.io/t/torch@sha256:00: manifest unknown\n";
  EXPECT_EQ(ContainerStartFailure({ok}), "");
  EXPECT_EQ(ContainerStartFailure({ok, pull}),
            "single reference rank 1: podman could not start the image (exit 125): Error: "
            "initializing source docker://reg.io/t/torch@sha256:00: manifest unknown");
  ProgramProcess killed = pull;
  killed.signal = 9;
  EXPECT_EQ(ContainerStartFailure({killed}), "");
  ProgramProcess missing = ok;
  missing.exit_code = 127;
  missing.stderr_tail = "";
  EXPECT_EQ(ContainerStartFailure({missing}),
            "single reference rank 0: the image has no such command (exit 127)");
}

}  // namespace
}  // namespace pilot::supervisor
