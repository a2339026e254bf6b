// supervisor/program/container.h: when a program may run in its image, the
// binds every process gets, one process's command wrapped in each
// runtime's, and what is read back of the image that ran.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

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
    // Installed or not on the machine that runs the test: a program that is.
    policy.container.podman_path = "/bin/true";
    policy.container.apptainer_path = "/bin/true";
  }
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// One process of alice's, two GPUs, the work folder bound, in `runtime`.
ContainerSetup SetupFor(const Fixture& f, const std::string& runtime) {
  ContainerSetup s;
  s.runtime = runtime;
  s.image = f.lock.container.pinned;
  s.mounts = {{"/w", "/w", false}};
  s.gpus = {"2", "5"};
  s.site = &f.policy.container;
  s.run_as = job::RunAs{1000, 100, "alice"};
  s.workdir = "/w";
  return s;
}

// train.py with the node's variables beside the program's.
RankLaunch TrainPy(std::vector<std::string> more = {}) {
  RankLaunch r;
  r.argv = {"python3", "train.py"};
  r.env = {"PATH=/home/alice/bin:/usr/bin", "LD_PRELOAD=/x.so", "PILOT_STAGE=single",
           "CUDA_VISIBLE_DEVICES=2,5", "HOME=/home/alice"};
  r.env.insert(r.env.end(), more.begin(), more.end());
  return r;
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
  EXPECT_EQ(ContainerProblem(h.cfg, h.lock, h.policy), "");
  h.policy.container.apptainer_path = "/nonexistent/apptainer";
  EXPECT_EQ(ContainerProblem(h.cfg, h.lock, h.policy),
            "container.runtime \"apptainer\": /nonexistent/apptainer is not installed on this "
            "node (pilot.conf(5), [container])");
  // An image file the prolog hashed: Apptainer's and pyxis's, not podman's.
  Fixture file;
  file.lock.container.method = "file";
  file.lock.container.pinned = "/images/torch.sif";
  EXPECT_NE(ContainerProblem(file.cfg, file.lock, file.policy).find("is a file: podman"),
            std::string::npos);
  file.cfg.container.runtime = "apptainer";
  file.policy.container.allowed_runtimes = {"apptainer"};
  EXPECT_EQ(ContainerProblem(file.cfg, file.lock, file.policy), "");
  file.lock.container.digest.clear();  // the prolog could not hash it
  EXPECT_NE(ContainerProblem(file.cfg, file.lock, file.policy).find("not pinned"),
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
  const ContainerSetup s = SetupFor(f, "podman");
  RankLaunch r = TrainPy();
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

// Proves: Apptainer runs as the user with only the variables it is given
// (APPTAINERENV_*, so the node's PATH and LD_* stay out), a contained
// /dev and home, the job's GPUs in the node's numbering, the site's
// Apptainer arguments (not podman's), the cache the site names, and an
// image file as the path the prolog hashed.
TEST(ProgramContainer, WrapsOneProcessInApptainer) {
  Fixture f;
  f.policy.container.podman_args = {"--podman-only"};
  f.policy.container.apptainer_args = {"--writable-tmpfs"};
  f.policy.container.image_cache = "/var/cache/pilot-images";
  ContainerSetup s = SetupFor(f, "apptainer");
  s.mounts.push_back({"/data/set", "/set", true});
  RankLaunch r = TrainPy();
  ASSERT_TRUE(WrapInContainer(s, "unused", &r).ok());
  EXPECT_FALSE(r.as_root);
  EXPECT_EQ(r.argv, (std::vector<std::string>{
                        "/bin/true", "exec", "--cleanenv", "--contain", "--pwd", "/w", "--bind",
                        "/w:/w,/data/set:/set:ro", "--nv", "--writable-tmpfs",
                        std::string("docker://reg.io/t/torch@") + kDigest, "python3", "train.py"}));
  EXPECT_TRUE(Has(r.env, "APPTAINERENV_PILOT_STAGE=single"));
  EXPECT_TRUE(Has(r.env, "APPTAINERENV_CUDA_VISIBLE_DEVICES=2,5"));
  EXPECT_TRUE(Has(r.env, "APPTAINER_CACHEDIR=/var/cache/pilot-images"));
  EXPECT_TRUE(Has(r.env, "HOME=/home/alice"));
  for (const std::string& kv : r.env) {
    EXPECT_EQ(kv.find("LD_PRELOAD"), std::string::npos) << kv;
    EXPECT_EQ(kv.find("/home/alice/bin"), std::string::npos) << kv;
  }

  s.image = "/images/torch.sif";
  s.gpus.clear();
  RankLaunch cpu;
  cpu.argv = {"python3", "train.py"};
  ASSERT_TRUE(WrapInContainer(s, "unused", &cpu).ok());
  EXPECT_TRUE(Has(cpu.argv, "/images/torch.sif"));
  EXPECT_FALSE(Has(cpu.argv, "--nv"));
}

// Proves: under pyxis each process is its own one-task step of the job on
// the supervisor's node, sharing the job's CPUs and GPUs with the phase's
// other steps (--overlap), in the pinned image in pyxis's spelling, with
// the binds, the site's pyxis arguments, no remapping to root and no home;
// the environment srun passes on is the program's less the node's (but
// PATH, which srun itself is found in).
TEST(ProgramContainer, WrapsOneProcessInPyxis) {
  Fixture f;
  f.policy.container.pyxis_args = {"--container-env=NCCL_DEBUG"};
  ContainerSetup s = SetupFor(f, "pyxis");
  s.node = "gpu07";
  RankLaunch r = TrainPy({"SLURM_JOB_ID=7"});
  ASSERT_TRUE(WrapInContainer(s, "unused", &r).ok());
  EXPECT_FALSE(r.as_root);
  ASSERT_FALSE(r.argv.empty());
  EXPECT_EQ(r.argv[0], "srun");
  EXPECT_EQ(std::vector<std::string>(r.argv.begin() + 1, r.argv.end()),
            (std::vector<std::string>{
                "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=gpu07",
                std::string("--container-image=reg.io#t/torch@") + kDigest,
                "--container-workdir=/w", "--no-container-remap-root",
                "--no-container-mount-home", "--container-mounts=/w:/w",
                "--container-env=NCCL_DEBUG", "python3", "train.py"}));
  EXPECT_TRUE(Has(r.env, "PILOT_STAGE=single"));
  EXPECT_TRUE(Has(r.env, "SLURM_JOB_ID=7"));
  EXPECT_TRUE(Has(r.env, "CUDA_VISIBLE_DEVICES=2,5"));
  EXPECT_FALSE(Has(r.env, "LD_PRELOAD=/x.so"));
  // srun is the job's, found in the job's PATH (the image's stands inside).
  EXPECT_TRUE(Has(r.env, "PATH=/home/alice/bin:/usr/bin"));

  // Across nodes: the same options on the ranks' step, before its command.
  std::vector<std::string> env = {"PILOT_STAGE=node", "LD_PRELOAD=/x.so"};
  Result<std::vector<std::string>> flags = PyxisStep(s, &env);
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->front(), std::string("--container-image=reg.io#t/torch@") + kDigest);
  EXPECT_EQ(flags->back(), "--container-env=NCCL_DEBUG");
  EXPECT_TRUE(Has(env, "PILOT_STAGE=node"));
  EXPECT_FALSE(Has(env, "LD_PRELOAD=/x.so"));
}

// Proves: what is recorded as having run. An image file is hashed again
// after the processes ran (a file changed in between reads as another
// digest); Apptainer and pyxis, which report nothing, are given the digest
// they were started with, and only once a process reported a step.
TEST(ProgramContainer, ReadsBackWhatRan) {
  const std::filesystem::path sif =
      std::filesystem::temp_directory_path() / ("pilot-readback-" + std::to_string(::getpid()));
  std::ofstream(sif) << "abc";
  ContainerSetup s;
  s.runtime = "apptainer";
  s.image = sif.string();
  ProgramContainer file = ReadBackContainer(s, {});
  EXPECT_EQ(file.digest,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
      << file.problem;
  EXPECT_EQ(file.digest_source, "file");
  std::ofstream(sif) << "abd";
  EXPECT_NE(ReadBackContainer(s, {}).digest, file.digest);
  std::filesystem::remove(sif);
  ProgramContainer gone = ReadBackContainer(s, {});
  EXPECT_EQ(gone.digest, "");
  EXPECT_NE(gone.problem.find("could not be hashed again"), std::string::npos) << gone.problem;

  s.runtime = "pyxis";
  s.image = std::string("reg.io/t/torch@") + kDigest;
  ProgramProcess silent;
  silent.exit_code = 1;
  ProgramContainer none = ReadBackContainer(s, {silent});
  EXPECT_EQ(none.digest, "");
  EXPECT_EQ(none.problem, "no process pyxis started reported a step");
  ProgramProcess reported = silent;
  reported.records = 3;
  ProgramContainer ran = ReadBackContainer(s, {silent, reported});
  EXPECT_EQ(ran.digest, kDigest);
  EXPECT_EQ(ran.digest_source, "reference");
}

// Proves: Apptainer's "FATAL:" line and pyxis's error (or srun's, when
// pyxis is not installed) name an image that did not start; a program that
// reported steps and then failed is not taken for the runtime.
TEST(ProgramContainer, StartFailureNamesWhatApptainerOrPyxisSaid) {
  ProgramProcess p;
  p.stage = "single";
  p.process = "reference";
  p.exit_code = 255;
  p.stderr_tail = "INFO:    Converting OCI blobs to SIF format\n"
                  "FATAL:   While making image from oci registry: manifest unknown\n";
  EXPECT_EQ(ContainerStartFailure("apptainer", {p}),
            "single reference rank 0: apptainer could not start the image (exit 255): FATAL:   "
            "While making image from oci registry: manifest unknown");
  ProgramProcess later = p;
  later.records = 4;
  EXPECT_EQ(ContainerStartFailure("apptainer", {later}), "");
  ProgramProcess srun = p;
  srun.exit_code = 1;
  srun.stderr_tail = "srun: unrecognized option '--container-image=reg.io#t/torch@sha256:00'\n";
  EXPECT_NE(ContainerStartFailure("pyxis", {srun}).find("pyxis could not start the image (exit 1)"),
            std::string::npos);
  ProgramProcess own = p;
  own.stderr_tail = "Traceback (most recent call last):\nValueError: bad\n";
  EXPECT_EQ(ContainerStartFailure("pyxis", {own}), "");
}

// Proves: the working folder, the user's to name, is bound from where it
// resolves as the job's user, and one beneath a folder closed to the user
// (which root could reach) is refused with a sentence naming it.
TEST(ProgramContainer, BindsTheWorkingFolderOnlyAsTheUserReachesIt) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("pilot-setup-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "real" / "proj");
  fs::create_directory_symlink(root / "real", root / "link");
  Fixture f;
  const std::string via_link = (root / "link" / "proj").string();
  Result<ContainerSetup> s = MakeContainerSetup(f.cfg, f.lock, f.policy, std::nullopt, via_link,
                                                "", {via_link}, "");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->mounts.size(), 1u);
  EXPECT_EQ(s->mounts[0], (Mount{(root / "real" / "proj").string(), via_link, false}));
  EXPECT_EQ(s->workdir, via_link);
  EXPECT_FALSE(MakeContainerSetup(f.cfg, f.lock, f.policy, std::nullopt,
                                  (root / "missing").string(), "", {}, "")
                   .ok());
  if (::geteuid() == 0) {
    fs::permissions(root / "real", fs::perms::owner_all);  // 0700, root's
    Result<ContainerSetup> closed =
        MakeContainerSetup(f.cfg, f.lock, f.policy, job::RunAs{65534, 65534, "nobody"},
                           via_link, "", {via_link}, "");
    ASSERT_FALSE(closed.ok());
    EXPECT_NE(closed.status().detail().find("the working folder " + via_link +
                                            " is not one the job's user can reach"),
              std::string::npos)
        << closed.status().detail();
  }
  fs::remove_all(root);
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
  EXPECT_EQ(ContainerStartFailure("podman", {ok}), "");
  EXPECT_EQ(ContainerStartFailure("podman", {ok, pull}),
            "single reference rank 1: podman could not start the image (exit 125): Error: "
            "initializing source docker://reg.io/t/torch@sha256:00: manifest unknown");
  ProgramProcess killed = pull;
  killed.signal = 9;
  EXPECT_EQ(ContainerStartFailure("podman", {killed}), "");
  ProgramProcess missing = ok;
  missing.exit_code = 127;
  missing.stderr_tail = "";
  EXPECT_EQ(ContainerStartFailure("podman", {missing}),
            "single reference rank 0: the image has no such command (exit 127)");
}

}  // namespace
}  // namespace pilot::supervisor
