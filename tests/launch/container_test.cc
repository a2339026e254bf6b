// launch/container.h: the exact command line of each runtime, and values
// that must not change its meaning (commas and colons in mounts, newlines
// and secrets in the environment, an image by tag).
#include "launch/container.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pilot::launch {
namespace {

constexpr char kDigest[] =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

ContainerRun Sample(const std::string& runtime) {
  ContainerRun r;
  r.runtime = runtime;
  r.image = std::string("reg.example:5000/team/torch@") + kDigest;
  r.uid = 1000;
  r.gid = 100;
  r.workdir = "/work/job/7";
  r.env = {"PILOT_STAGE=single", "SECRET=a,b\nc"};
  r.mounts = {{"/work/job/7", "/work/job/7", false}, {"/opt/probe", "/opt/probe", true}};
  r.gpus = {"0", "3"};
  r.command = {"python3", "train.py", "--lr", "1e-3"};
  return r;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ContainerCommand, PodmanArgvExactly) {
  ContainerRun r = Sample(kRuntimePodman);
  r.program_path = "/usr/bin/podman";
  r.image_cache = "/var/cache/pilot/podman";
  r.containers_conf = "/etc/slurm-pilot/containers.conf";
  r.name = "pilot-7-single-reference-0";
  r.cgroup_parent = "/slurm/uid_1000/job_7/step_0/task_0";
  r.site_args = {"--shm-size=8g"};
  auto c = BuildContainerCommand(r, {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<std::string> want = {"/usr/bin/podman",
                                         "--root",
                                         "/var/cache/pilot/podman",
                                         "run",
                                         "--rm",
                                         "--pull=missing",
                                         "--user=1000:100",
                                         "--network=host",
                                         "--security-opt=no-new-privileges",
                                         "--cap-drop=all",
                                         "--workdir=/work/job/7",
                                         "--cgroup-parent=/slurm/uid_1000/job_7/step_0/task_0",
                                         "--name=pilot-7-single-reference-0",
                                         "--env",
                                         "PILOT_STAGE",
                                         "--env",
                                         "SECRET",
                                         "--volume=/work/job/7:/work/job/7",
                                         "--volume=/opt/probe:/opt/probe:ro",
                                         "--device=nvidia.com/gpu=0",
                                         "--device=nvidia.com/gpu=3",
                                         "--shm-size=8g",
                                         "--entrypoint=",
                                         std::string("reg.example:5000/team/torch@") + kDigest,
                                         "python3",
                                         "train.py",
                                         "--lr",
                                         "1e-3"};
  EXPECT_EQ(c->argv, want);
  EXPECT_TRUE(c->as_root);
  // What removes the container, by its name, if its podman is killed.
  EXPECT_EQ(c->remove_argv,
            (std::vector<std::string>{"/usr/bin/podman", "--root", "/var/cache/pilot/podman", "rm",
                                      "--force", "--ignore", "--time", "0",
                                      "pilot-7-single-reference-0"}));
  // Values travel in podman's environment, never on its command line.
  EXPECT_TRUE(Has(c->env, "SECRET=a,b\nc"));
  EXPECT_TRUE(Has(c->env, "CONTAINERS_CONF=/etc/slurm-pilot/containers.conf"));
  EXPECT_TRUE(Has(c->env, "PATH=/usr/bin:/bin"));
  for (const std::string& a : c->argv) EXPECT_EQ(a.find("a,b"), std::string::npos) << a;
}

TEST(ContainerCommand, PodmanKeepsVariablesItReadsItselfOffItsOwnEnvironment) {
  ContainerRun r = Sample(kRuntimePodman);
  r.env = {"LD_PRELOAD=/home/u/evil.so", "PATH=/opt/conda/bin:/usr/bin", "X=1"};
  auto c = BuildContainerCommand(r, {"PATH=/usr/sbin:/usr/bin"});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(Has(c->argv, "LD_PRELOAD=/home/u/evil.so"));
  EXPECT_TRUE(Has(c->argv, "PATH=/opt/conda/bin:/usr/bin"));
  EXPECT_TRUE(Has(c->env, "PATH=/usr/sbin:/usr/bin"));  // root's own, unchanged
  EXPECT_FALSE(Has(c->env, "LD_PRELOAD=/home/u/evil.so"));
  EXPECT_TRUE(Has(c->env, "X=1"));
  r.env = {"LD_LIBRARY_PATH=/a\n--privileged"};
  auto bad = BuildContainerCommand(r, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("newline"), std::string::npos);
}

TEST(ContainerCommand, ApptainerArgvExactly) {
  ContainerRun r = Sample(kRuntimeApptainer);
  r.image_cache = "/var/cache/apptainer";
  auto c = BuildContainerCommand(r, {"PATH=/usr/bin"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<std::string> want = {
      "apptainer",
      "exec",
      "--cleanenv",
      "--contain",
      "--pwd",
      "/work/job/7",
      "--bind",
      "/work/job/7:/work/job/7,/opt/probe:/opt/probe:ro",
      "--nv",
      std::string("docker://reg.example:5000/team/torch@") + kDigest,
      "python3",
      "train.py",
      "--lr",
      "1e-3"};
  EXPECT_EQ(c->argv, want);
  EXPECT_FALSE(c->as_root);
  EXPECT_TRUE(Has(c->env, "APPTAINERENV_SECRET=a,b\nc"));
  EXPECT_TRUE(Has(c->env, "APPTAINER_CACHEDIR=/var/cache/apptainer"));
  r.image = "/images/torch.sif";
  r.gpus.clear();
  c = BuildContainerCommand(r, {});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(Has(c->argv, "/images/torch.sif"));
  EXPECT_FALSE(Has(c->argv, "--nv"));
}

TEST(ContainerCommand, PyxisArgvExactly) {
  ContainerRun r = Sample(kRuntimePyxis);
  r.site_args = {"--container-env=NCCL_DEBUG"};
  r.node = "gpu07";
  auto c = BuildContainerCommand(r, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<std::string> want = {
      "srun",
      "--overlap",
      "--nodes=1",
      "--ntasks=1",
      "--nodelist=gpu07",
      std::string("--container-image=reg.example:5000#team/torch@") + kDigest,
      "--container-workdir=/work/job/7",
      "--no-container-remap-root",
      "--no-container-mount-home",
      "--container-mounts=/work/job/7:/work/job/7,/opt/probe:/opt/probe:ro",
      "--container-env=NCCL_DEBUG",
      "python3",
      "train.py",
      "--lr",
      "1e-3"};
  EXPECT_EQ(c->argv, want);
  EXPECT_TRUE(Has(c->env, "SECRET=a,b\nc"));
  // The options of a step across nodes are the same, less srun's own.
  EXPECT_EQ(PyxisFlags(r), std::vector<std::string>(want.begin() + 5, want.end() - 4));
  r.node = "gpu07,gpu08";
  EXPECT_FALSE(BuildContainerCommand(r, {}).ok());
}

TEST(ContainerCommand, PyxisImageNamesTheRegistryWithAHash) {
  EXPECT_EQ(PyxisImage("nvcr.io/nvidia/pytorch@sha256:ab"), "nvcr.io#nvidia/pytorch@sha256:ab");
  EXPECT_EQ(PyxisImage("localhost/a@sha256:ab"), "localhost#a@sha256:ab");
  EXPECT_EQ(PyxisImage("library/ubuntu@sha256:ab"), "library/ubuntu@sha256:ab");
  EXPECT_EQ(PyxisImage("ubuntu@sha256:ab"), "ubuntu@sha256:ab");
  EXPECT_EQ(PyxisImage("/images/x.sqsh"), "/images/x.sqsh");
}

TEST(ContainerCommand, RefusesATagAndHostileValues) {
  for (const char* rt : {kRuntimePodman, kRuntimeApptainer, kRuntimePyxis}) {
    ContainerRun r = Sample(rt);
    r.image = "reg.example:5000/team/torch:latest";
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r = Sample(rt);
    r.mounts = {{"/data/a,/etc", "/data", false}};  // would be two binds
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r.mounts = {{"/data/a:/etc", "/data", false}};  // would be two fields
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r.mounts = {{"/data/../etc", "/data", false}};
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r = Sample(rt);
    r.env = {"BAD NAME=1"};
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r.env = {"NOVALUE"};
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r = Sample(rt);
    r.gpus = {"0,1"};
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r = Sample(rt);
    r.workdir = "relative";
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    r = Sample(rt);
    r.command.clear();
    EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt;
    for (const char* parent : {"relative", "/a/../b", "/a,b"}) {
      r = Sample(rt);
      r.cgroup_parent = parent;
      EXPECT_FALSE(BuildContainerCommand(r, {}).ok()) << rt << " " << parent;
    }
  }
  ContainerRun r = Sample("docker");
  auto c = BuildContainerCommand(r, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("unknown runtime \"docker\""), std::string::npos)
      << c.status().ToString();
  ContainerRun p = Sample(kRuntimePodman);
  p.image = "/images/x.sif";
  EXPECT_FALSE(BuildContainerCommand(p, {}).ok());
}

TEST(ContainerCommand, DigestOf) {
  EXPECT_EQ(DigestOf(std::string("a/b@") + kDigest), kDigest);
  EXPECT_EQ(DigestOf("a/b:tag"), "");
  EXPECT_EQ(DigestOf("a/b@sha256:short"), "");
}

}  // namespace
}  // namespace pilot::launch
