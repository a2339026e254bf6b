// supervisor/program/container_task.h: what a task of the srun step across
// nodes may run as root's podman or as the user's Apptainer, checked against root's record of the job
// on the node: the pinned image only, binds of the user's own folders or
// the probe's, mounts the site allows, the record's GPUs.
#include "supervisor/program/container_task.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "job/env_names.h"
#include "job/state_layout.h"

namespace pilot::supervisor {
namespace {

namespace fs = std::filesystem;

constexpr char kImage[] =
    "reg.io/t/torch@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr uid_t kUid = 4242;
constexpr int64_t kJob = 77;

class ContainerTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "root's records need root";
    root_ = fs::temp_directory_path() / ("pilot-ctask-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "state");
    policy_.state_dir = (root_ / "state").string();
    policy_.probe_path = (root_ / "probe").string();
    policy_.container.allowed_runtimes = {"none", "podman"};
    policy_.container.allowed_mounts = {"/data"};
    fs::create_directories(policy_.probe_path);
    work_ = (root_ / "work").string();
    fs::create_directories(work_);
    ASSERT_EQ(::chown(work_.c_str(), kUid, kUid), 0);
    lock_.job.id = kJob;
    lock_.job.uid = kUid;
    lock_.job.gpus = "1,3";
    lock_.seeds.source = "job_id";
    lock_.created = "2026-12-04T00:00:00Z";
    lock_.container.method = "registry";
    lock_.container.pinned = kImage;
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  // The record as the prolog of another node writes it.
  void WriteNodeRecord(const std::string& node) {
    const job::StateLayout layout(policy_.state_dir, "");
    fs::create_directories(layout.NodeRecordsDir(kJob));
    ASSERT_TRUE(WriteFileAtomic(layout.NodeRecordFile(kJob, node), LockToJson(lock_)).ok());
  }

  ContainerTaskInput Input(const std::string& node) {
    ContainerTaskInput in;
    in.job_id = kJob;
    in.step_id = 3;
    in.task_id = 2;
    in.node = node;
    in.run_as = job::RunAs{kUid, kUid, "alice"};
    in.policy = &policy_;
    in.env = {std::string(job::kEnvContainerImage) + "=" + kImage,
              std::string(job::kEnvContainerWorkdir) + "=" + work_,
              std::string(job::kEnvContainerBinds) + "=" + work_ + "\n" + policy_.probe_path,
              std::string(job::kEnvContainerMounts) + "=/data/set:/set:ro",
              "SLURM_PROCID=2",
              "CUDA_VISIBLE_DEVICES=0,1",
              "PATH=/usr/bin"};
    in.command = {"/bin/sh", "-c", "echo hi"};
    return in;
  }

  static void SetVar(ContainerTaskInput* in, const std::string& name, const std::string& value) {
    std::erase_if(in->env, [&](const std::string& kv) { return kv.rfind(name + "=", 0) == 0; });
    in->env.push_back(name + "=" + value);
  }

  static bool Has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  }

  fs::path root_;
  Policy policy_;
  Lock lock_;
  std::string work_;
};

TEST_F(ContainerTaskTest, RunsTheTaskInThePinnedImageWithTheRecordsGpus) {
  WriteNodeRecord("pn2");
  Result<RankLaunch> r = PlanContainerTask(Input("pn2"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->as_root);
  const std::vector<std::string>& a = r->argv;
  EXPECT_TRUE(Has(a, "--user=4242:4242"));
  EXPECT_TRUE(Has(a, "--name=pilot-77-3-2"));
  EXPECT_TRUE(Has(a, "--volume=" + work_ + ":" + work_));
  EXPECT_TRUE(Has(a, "--volume=" + policy_.probe_path + ":" + policy_.probe_path));
  EXPECT_TRUE(Has(a, "--volume=/data/set:/set:ro"));
  EXPECT_TRUE(Has(a, "--device=nvidia.com/gpu=1"));
  EXPECT_TRUE(Has(a, "--device=nvidia.com/gpu=3"));
  EXPECT_TRUE(Has(a, "--workdir=" + work_));
  const auto image = std::find(a.begin(), a.end(), kImage);
  ASSERT_NE(image, a.end());
  EXPECT_EQ(std::vector<std::string>(image + 1, a.end()),
            (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  // The rank's variables reach the program; the step's marks do not, and
  // the GPUs are the record's, renumbered inside.
  EXPECT_TRUE(Has(r->env, "SLURM_PROCID=2"));
  EXPECT_TRUE(Has(r->env, "CUDA_VISIBLE_DEVICES=0,1"));
  for (const std::string& kv : r->env)
    EXPECT_EQ(kv.find("SLURM_PILOT_CONTAINER_"), std::string::npos) << kv;
}

// Proves: a step marked for Apptainer runs the task as the user (not as
// root) under the site's apptainer, with the task's variables passed as
// APPTAINERENV_* and the node's GPUs in the node's numbering; an image
// file pinned by its SHA-256 serves Apptainer, never podman; pyxis, whose
// steps carry their own options, and a runtime the site does not allow are
// refused.
TEST_F(ContainerTaskTest, RunsAnApptainerTaskAsTheUser) {
  policy_.container.allowed_runtimes = {"none", "apptainer"};
  policy_.container.apptainer_path = "/bin/true";
  WriteNodeRecord("pn2");
  ContainerTaskInput in = Input("pn2");
  SetVar(&in, job::kEnvContainerRuntime, "apptainer");
  Result<RankLaunch> r = PlanContainerTask(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->as_root);
  EXPECT_EQ(r->argv.front(), "/bin/true");
  EXPECT_TRUE(Has(r->argv, "--bind"));
  EXPECT_TRUE(Has(r->argv, "--nv"));
  EXPECT_TRUE(Has(r->argv, std::string("docker://") + kImage));
  EXPECT_TRUE(Has(r->env, "APPTAINERENV_SLURM_PROCID=2"));
  EXPECT_TRUE(Has(r->env, "APPTAINERENV_CUDA_VISIBLE_DEVICES=0,1"));

  // The same step where the site allows podman only.
  policy_.container.allowed_runtimes = {"none", "podman"};
  r = PlanContainerTask(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("does not allow apptainer"), std::string::npos)
      << r.status().Message();
  SetVar(&in, job::kEnvContainerRuntime, "pyxis");
  policy_.container.allowed_runtimes = {"none", "pyxis"};
  r = PlanContainerTask(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("is not one a task is handed over for"), std::string::npos)
      << r.status().Message();

  // An image file: Apptainer's when it is the pinned one.
  policy_.container.allowed_runtimes = {"none", "podman", "apptainer"};
  lock_.container.method = "file";
  lock_.container.pinned = "/images/torch.sif";
  lock_.container.digest = std::string("sha256:") + std::string(64, 'a');
  WriteNodeRecord("pn2");
  SetVar(&in, job::kEnvContainerRuntime, "apptainer");
  SetVar(&in, job::kEnvContainerImage, "/images/torch.sif");
  r = PlanContainerTask(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(Has(r->argv, "/images/torch.sif"));
  SetVar(&in, job::kEnvContainerRuntime, "podman");
  EXPECT_FALSE(PlanContainerTask(in).ok());
}

TEST_F(ContainerTaskTest, TheLockServesOnTheFirstNode) {
  const job::StateLayout layout(policy_.state_dir, "");
  fs::create_directories(fs::path(layout.Job(kJob).lock).parent_path());
  ASSERT_TRUE(WriteFileAtomic(layout.Job(kJob).lock, LockToJson(lock_)).ok());
  EXPECT_TRUE(PlanContainerTask(Input("pn1")).ok());
}

TEST_F(ContainerTaskTest, RefusesWhatRootsRecordsDoNotHold) {
  // No record of the job on this node.
  Result<RankLaunch> r = PlanContainerTask(Input("pn2"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("no record of job 77 on pn2"), std::string::npos)
      << r.status().Message();
  WriteNodeRecord("pn2");

  // Another image than the pinned one, or a tag.
  ContainerTaskInput in = Input("pn2");
  SetVar(&in, job::kEnvContainerImage, "reg.io/t/torch:1");
  r = PlanContainerTask(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("is not the image the prolog of pn2 pinned"),
            std::string::npos)
      << r.status().Message();

  // A folder that is not the user's, or reached through a link.
  in = Input("pn2");
  SetVar(&in, job::kEnvContainerBinds, "/etc");
  r = PlanContainerTask(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("\"/etc\" is neither a folder of alice's"), std::string::npos)
      << r.status().Message();
  const std::string link = (root_ / "link").string();
  fs::create_symlink(work_, link);
  in = Input("pn2");
  SetVar(&in, job::kEnvContainerBinds, link);
  SetVar(&in, job::kEnvContainerWorkdir, link);
  EXPECT_FALSE(PlanContainerTask(in).ok());

  // A mount the site does not allow.
  in = Input("pn2");
  SetVar(&in, job::kEnvContainerMounts, "/etc:/host-etc");
  r = PlanContainerTask(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("allowed_mounts"), std::string::npos) << r.status().Message();

  // A working folder that is not bound.
  in = Input("pn2");
  SetVar(&in, job::kEnvContainerWorkdir, "/srv");
  EXPECT_FALSE(PlanContainerTask(in).ok());

  // podman not allowed by this node's policy.
  policy_.container.allowed_runtimes = {"none"};
  r = PlanContainerTask(Input("pn2"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("does not allow podman"), std::string::npos);
}

TEST_F(ContainerTaskTest, ARecordOfAnotherUserIsNotTrusted) {
  lock_.job.uid = kUid + 1;
  WriteNodeRecord("pn2");
  Result<RankLaunch> r = PlanContainerTask(Input("pn2"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().Message().find("pn2.json: job 77, uid 4243"), std::string::npos)
      << r.status().Message();
}

}  // namespace
}  // namespace pilot::supervisor
