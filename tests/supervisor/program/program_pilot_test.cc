// Program mode end to end, without Slurm: pilot-supervisor's Supervise()
// runs real Python PyTorch programs from tests/program/ as the calling
// user, reads their records from its FIFOs, lists their checkpoints with
// the build's pilot-runner and writes results.json. Each broken program
// must fail for its own reason, in words a user acts on; clean ones pass.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/decide/program_checks.h"
#include "core/records/lock.h"
#include "core/records/results.h"
#include "supervisor/supervise.h"

namespace pilot::supervisor {
namespace {

namespace fs = std::filesystem;

const char kInstance[] = "0123456789abcdef0123456789abcdef";

// The tests' Python with torch (tests/CMakeLists.txt), as a TOML string.
const std::string kPython = std::string("\"") + PILOT_TORCH_PYTHON + "\"";

bool HaveTorch() {
  static const bool have =
      std::system((std::string(PILOT_TORCH_PYTHON) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return have;
}

class ProgramPilotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveTorch()) GTEST_SKIP() << "Python torch is not installed";
    char tmpl[] = "/tmp/pilot-program-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/jobs/1/work");
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // The [program] and [training] part; [run] is fixed.
  int Run(const std::string& body, const std::string& stage = "all") {
    const std::string config =
        "[run]\nname = \"tiny\"\nseq_len = 16\nmicro_batch = 4\ntarget_steps = 1000\n"
        "gpus_per_node = 2\n" + body;
    const std::string copy = dir_ + "/jobs/1/config.toml";
    EXPECT_TRUE(WriteFileAtomic(copy, config).ok());
    Lock lock;
    lock.instance = kInstance;
    lock.job.id = 1;
    passwd* pw = getpwuid(getuid());
    lock.job.user = pw != nullptr ? pw->pw_name : "root";
    lock.job.uid = getuid();
    lock.job.gid = getgid();
    lock.job.submit_dir = std::string(PILOT_SOURCE_DIR) + "/tests/program";
    lock.config.path = copy;
    lock.config.copy = copy;
    lock.seeds.training = 1234;
    lock.seeds.source = "config";
    lock.container.method = "none";
    lock.created = "2026-12-01T00:00:00Z";
    EXPECT_TRUE(WriteFileAtomic(dir_ + "/jobs/1/lock.json", LockToJson(lock)).ok());
    SuperviseOptions o;
    o.job_id = 1;
    o.home = pw != nullptr ? pw->pw_dir : "/";
    o.runner = PILOT_RUNNER_PATH;
    o.stage = stage;
    o.job_env = job_env_;
    o.policy.state_dir = dir_;
    o.policy.probe_path = std::string(PILOT_SOURCE_DIR) + "/python";
    o.policy.verify_timeout_seconds = 120;
    const int rc = Supervise(o);
    Result<Results> r = ReadResultsFile(dir_ + "/jobs/1/results.json");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) results_ = *r;
    return rc;
  }

  static std::string Tiny(const std::string& fault = "", int steps = 8, const std::string& extra = "") {
    std::string cmd = "command = [" + kPython + ", \"tiny.py\"";
    if (!fault.empty()) cmd += ", \"--fault\", \"" + fault + "\"";
    cmd += "]\n";
    return "[program]\n" + cmd + "step_timeout = 30\n" + extra + "[training]\nsteps = " +
           std::to_string(steps) + "\ndevice = \"cpu\"\ndeterministic = true\nwarmup_steps = 1\n" +
           "[checkpoint]\nat_step = 4\n[parallel]\nnproc = 2\n";
  }

  // Every problem the supervisor recorded, joined (for messages).
  std::string Problems() const {
    std::string out;
    if (results_.program) {
      for (const std::string& p : results_.program->problems) out += p + " | ";
    }
    return out;
  }

  std::string dir_;
  std::vector<std::string> job_env_ = {"PATH=/usr/bin:/bin"};
  Results results_;
};

TEST_F(ProgramPilotTest, ACleanProgramResumesBitwiseInBothStages) {
  EXPECT_EQ(Run(Tiny()), 0) << Problems();
  ASSERT_TRUE(results_.program);
  EXPECT_EQ(results_.workload, "program");
  EXPECT_TRUE(results_.program->problems.empty()) << Problems();
  ASSERT_TRUE(results_.single);
  const SingleStage& s = *results_.single;
  EXPECT_EQ(s.status, "ok");
  EXPECT_EQ(s.losses.size(), 8u);
  EXPECT_TRUE(s.restore.ran);
  EXPECT_TRUE(s.restore.equal) << s.restore.detail;
  EXPECT_EQ(s.restore.mode, "bitwise");
  EXPECT_EQ(s.restore.resumed_losses.size(), 4u);
  EXPECT_GT(s.shape.params, 0);
  EXPECT_EQ(s.shape.seq_len, 16);
  EXPECT_EQ(s.shape.micro_batch, 4);
  EXPECT_TRUE(results_.program->shape_reported);
  EXPECT_TRUE(results_.program->lr_compared);
  EXPECT_GT(results_.program->checkpoint_file_count, 0);
  EXPECT_GT(s.tokens_per_second, 0);
  EXPECT_TRUE(s.memory.process_peak_rss_bytes.has_value());
  ASSERT_TRUE(results_.node);
  EXPECT_EQ(results_.node->world_size, 2);
  EXPECT_EQ(results_.node->status, "ok") << Problems();
  ASSERT_EQ(results_.node->restore.size(), 1u);
  EXPECT_TRUE(results_.node->restore[0].equal) << results_.node->restore[0].detail;
  EXPECT_TRUE(results_.supervisor && results_.supervisor->restore_compared);
  // Reference and resumed, single and node (two ranks each).
  EXPECT_EQ(results_.program->processes.size(), 6u);
}

// Code Python loads from outside the pins would change the pinned program
// without changing its identity (only in the resumed process, say): a
// sitecustomize.py on the job's PYTHONPATH, and in the user's site folder
// (where pip install --user puts packages) a usercustomize.py and a .pth
// file. Each would run with the job's environment; none runs in the pilot.
TEST_F(ProgramPilotTest, PythonHooksOutsideThePinsDoNotRun) {
  const std::string hooks = dir_ + "/hooks", base = dir_ + "/userbase";
  fs::create_directories(hooks);
  const std::vector<std::string> hostile = {"PATH=/usr/bin:/bin", "PYTHONPATH=" + hooks,
                                            "PYTHONUSERBASE=" + base};
  std::string user_site;
  {
    const std::string cmd = "env -i PYTHONUSERBASE=" + base + " " + PILOT_TORCH_PYTHON +
                            " -c 'import site; print(site.getusersitepackages())'";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char line[4096] = {0};
    ASSERT_NE(fgets(line, sizeof line, f), nullptr);
    pclose(f);
    user_site = line;
    while (!user_site.empty() && user_site.back() == '\n') user_site.pop_back();
  }
  fs::create_directories(user_site);
  auto marker = [&](const std::string& what) { return dir_ + "/hook-ran-" + what; };
  auto hook = [&](const std::string& what) { return "open('" + marker(what) + "', 'w').close()\n"; };
  ASSERT_TRUE(WriteFileAtomic(hooks + "/sitecustomize.py", hook("sitecustomize")).ok());
  ASSERT_TRUE(WriteFileAtomic(user_site + "/usercustomize.py", hook("usercustomize")).ok());
  ASSERT_TRUE(WriteFileAtomic(user_site + "/hook.pth", "import os; " + hook("pth")).ok());
  // With the job's environment as it is, each hook runs.
  std::string control = "env -i";
  for (const std::string& kv : hostile) control += " '" + kv + "'";
  ASSERT_EQ(std::system((control + " " + PILOT_TORCH_PYTHON + " -c pass").c_str()), 0);
  for (const char* what : {"sitecustomize", "usercustomize", "pth"}) {
    ASSERT_TRUE(fs::exists(marker(what))) << what << " did not run without the pilot";
    fs::remove(marker(what));
  }
  job_env_ = hostile;
  EXPECT_EQ(Run(Tiny(), "single"), 0) << Problems();
  for (const char* what : {"sitecustomize", "usercustomize", "pth"}) {
    EXPECT_FALSE(fs::exists(marker(what))) << what << " ran in the pilot's processes";
  }
}

// A resume, not a retrain: a resumed process that reads its whole
// checkpoint, throws it away and trains steps 1..K again before it reports
// K+1 opens every file and reports the reference's losses, but does about K
// of the reference's steps more work before its first record than the
// reference did before its step 1; an honest resume does not (steps of
// 0.9 CPU-s, K = 4 of 5: a retrain is 3.6 CPU-s more, the limit 2.8).
TEST_F(ProgramPilotTest, AResumeIsToldFromARetrainByItsWorkBeforeStepKPlusOne) {
  auto config = [](const std::string& fault) {
    const std::string cmd = "command = [" + kPython + ", \"tiny.py\", \"--step-cpu\", \"0.9\"" +
                            (fault.empty() ? "" : ", \"--fault\", \"" + fault + "\"") + "]\n";
    return "[program]\n" + cmd +
           "step_timeout = 60\n[training]\nsteps = 5\ndevice = \"cpu\"\ndeterministic = true\n"
           "warmup_steps = 1\n[checkpoint]\nat_step = 4\n[parallel]\nnproc = 2\n";
  };
  EXPECT_EQ(Run(config(""), "single"), 0) << Problems();
  ASSERT_TRUE(results_.program);
  const Check honest = ResumedWorkCheck(*results_.program, 4);
  EXPECT_EQ(honest.status, CheckStatus::kPass) << honest.detail;

  fs::remove_all(dir_ + "/jobs/1");
  fs::create_directories(dir_ + "/jobs/1/work");
  results_ = Results{};
  Run(config("reread_retrain"), "single");
  ASSERT_TRUE(results_.program);
  ASSERT_TRUE(results_.single);
  // Its losses equal the reference's to the bit (its claimed restore point
  // keeps the freshly seeded generator, which the state check names too).
  EXPECT_FALSE(results_.single->restore.resumed_losses.empty());
  EXPECT_EQ(results_.single->restore.max_abs_loss_diff, 0);
  EXPECT_EQ(results_.program->checkpoint_read.opened_files, results_.program->checkpoint_read.files);
  const Check retrain = ResumedWorkCheck(*results_.program, 4);
  EXPECT_EQ(retrain.status, CheckStatus::kFail) << retrain.detail;
  EXPECT_NE(retrain.detail.find("trains steps 1..K again"), std::string::npos) << retrain.detail;
}

struct Broken {
  const char* fault;
  const char* expect;  // in the reason
};

class BrokenProgramTest : public ProgramPilotTest,
                          public ::testing::WithParamInterface<Broken> {};

TEST_P(BrokenProgramTest, FailsNamingItsReason) {
  const Broken b = GetParam();
  EXPECT_NE(Run(Tiny(b.fault), "single"), 0) << b.fault;
  ASSERT_TRUE(results_.program);
  EXPECT_NE(Problems().find(b.expect), std::string::npos)
      << b.fault << ": got " << Problems();
}

INSTANTIATE_TEST_SUITE_P(
    Faults, BrokenProgramTest,
    ::testing::Values(Broken{"optimizer_not_saved", "losses diverge after resume from step 6"},
                      Broken{"rng_not_restored", "diverge after resume from step 5"},
                      Broken{"scheduler_reset", "learning rate differs after resume at step"},
                      Broken{"resume_ignored", "reported step 1 first, not 5"},
                      Broken{"raise_on_resume", "KeyError"},
                      Broken{"nan", "loss is nan at step 3"},
                      Broken{"no_checkpoint", "no checkpoint"},
                      Broken{"oom", "ran out of memory at step 2"},
                      Broken{"no_metrics", "wrote no metrics records"}),
    [](const ::testing::TestParamInfo<Broken>& i) { return std::string(i.param.fault); });

TEST_F(ProgramPilotTest, AHangIsEndedAfterTheStepTimeout) {
  const std::string body = Tiny("hang");
  std::string shorter = body;
  shorter.replace(shorter.find("step_timeout = 30"), 17, "step_timeout = 5");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(Run(shorter, "single"), 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 60) << "the hung program was not ended";
  ASSERT_TRUE(results_.single && results_.single->failure);
  EXPECT_NE(results_.single->failure->message.find("program.step_timeout = 5"), std::string::npos);
}

TEST_F(ProgramPilotTest, AWrongShapeIsReportedAsMeasured) {
  EXPECT_EQ(Run(Tiny("wrong_shape"), "single"), 0) << Problems();
  ASSERT_TRUE(results_.single);
  EXPECT_EQ(results_.single->shape.seq_len, 8);
}

TEST_F(ProgramPilotTest, LossPatternStandsInForMetrics) {
  const std::string body =
      "[program]\ncommand = [" + kPython + ", \"print_loss.py\"]\nstep_timeout = 30\n"
      "loss_pattern = \"loss=([0-9.eE+-]+)\"\n[training]\nsteps = 8\ndevice = \"cpu\"\n"
      "deterministic = true\nwarmup_steps = 1\n[checkpoint]\nat_step = 4\n[parallel]\nnproc = 1\n";
  EXPECT_EQ(Run(body), 0) << Problems();
  ASSERT_TRUE(results_.single);
  EXPECT_EQ(results_.program->metrics, "loss_pattern");
  EXPECT_EQ(results_.single->losses.size(), 8u);
  EXPECT_TRUE(results_.single->restore.equal) << results_.single->restore.detail;
  EXPECT_FALSE(results_.node.has_value());  // one rank: no node stage
}

// Proves: without deterministic kernels (here a program whose weights move
// by unseeded noise after each step, as a GPU's rounding does), steps past
// the tolerance are judged against a second process resumed from the same
// checkpoint: an honest restore passes as noise; an optimizer built afresh
// on resume, whose first step still equals the reference's and which no
// fingerprint shows (the program reports through loss_pattern only),
// fails on the next step by many times the spread.
TEST_F(ProgramPilotTest, WithoutDeterministicKernelsTheRestoreIsJudgedAgainstASecondResume) {
  const std::string body =
      "[program]\ncommand = [" + kPython + ", \"print_loss.py\"]\nstep_timeout = 30\n"
      "loss_pattern = \"loss=([0-9.eE+-]+)\"\nenv = { PRINT_LOSS_JITTER = \"1e-4\"FAULT }\n"
      "[training]\nsteps = 8\ndevice = \"cpu\"\nwarmup_steps = 1\ndeterministic = false\n"
      "[checkpoint]\nat_step = 4\n[eval]\nrestore_tolerance = 1e-7\n[parallel]\nnproc = 1\n";
  std::string honest = body;
  honest.replace(honest.find("FAULT"), 5, "");
  EXPECT_EQ(Run(honest, "single"), 0) << Problems();
  ASSERT_TRUE(results_.single);
  const RestoreInfo& r = results_.single->restore;
  EXPECT_TRUE(r.equal) << r.detail;
  EXPECT_EQ(r.mode, "noise");
  EXPECT_EQ(r.first_rel_loss_diff, 0);  // a forward of the restored state
  EXPECT_GT(r.noise_steps, 0);
  EXPECT_LE(r.noise_max_ratio, 10);
  EXPECT_EQ(r.repeat_losses.size(), 4u);
  ASSERT_TRUE(results_.program);
  int repeats = 0;
  for (const ProgramProcess& p : results_.program->processes) repeats += p.process == "repeat";
  EXPECT_EQ(repeats, 1);

  std::string broken = body;
  broken.replace(broken.find("FAULT"), 5, ", PRINT_LOSS_FAULT = \"optimizer_not_restored\"");
  fs::remove_all(dir_ + "/jobs/1");
  fs::create_directories(dir_ + "/jobs/1/work");
  results_ = Results{};
  EXPECT_NE(Run(broken, "single"), 0);
  ASSERT_TRUE(results_.single);
  EXPECT_FALSE(results_.single->restore.equal);
  EXPECT_EQ(results_.single->restore.mode, "noise");
  EXPECT_NE(results_.single->restore.detail.find("from step 6 (rank 0)"), std::string::npos)
      << results_.single->restore.detail;
  EXPECT_NE(results_.single->restore.detail.find("times the spread of a second resumed process"),
            std::string::npos)
      << results_.single->restore.detail;
}

TEST_F(ProgramPilotTest, ALauncherNoneProgramStartsItsOwnWorkers) {
  const std::string body =
      "[program]\ncommand = [" + kPython + ", \"spawner.py\"]\nstep_timeout = 60\n"
      "launcher = \"none\"\n[training]\nsteps = 6\ndevice = \"cpu\"\ndeterministic = true\n"
      "warmup_steps = 1\n[checkpoint]\nat_step = 3\n[parallel]\nnproc = 2\n";
  EXPECT_EQ(Run(body), 0) << Problems();
  ASSERT_TRUE(results_.node);
  EXPECT_EQ(results_.node->status, "ok") << Problems();
  EXPECT_EQ(results_.node->ranks.size(), 2u);
}

TEST_F(ProgramPilotTest, AMissingInterpreterIsAReasonNotACrash) {
  const std::string body =
      "[program]\ncommand = [\"no-such-python\", \"train.py\"]\n[training]\nsteps = 4\n"
      "device = \"cpu\"\nwarmup_steps = 1\n";
  EXPECT_NE(Run(body, "single"), 0);
  ASSERT_TRUE(results_.single && results_.single->failure);
  EXPECT_NE(results_.single->failure->message.find("not found in PATH"), std::string::npos)
      << results_.single->failure->message;
}

}  // namespace
}  // namespace pilot::supervisor
