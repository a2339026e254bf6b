// pilot-program(7) against the code: every variable ProgramEnv sets is a
// tag of its ENVIRONMENT section, every field ParseMetricLine reads one of
// its METRICS RECORD section; and what ProgramEnv passes, adds and drops.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "supervisor/program/metrics.h"
#include "supervisor/program/program_env.h"

namespace pilot::supervisor {
namespace {

// The words of every .TP tag in section `name` of pilot-program(7).
std::set<std::string> Tags(const std::string& name) {
  std::ifstream in(std::string(PILOT_SOURCE_DIR) + "/man/pilot-program.7");
  EXPECT_TRUE(in.good());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::set<std::string> tags;
  bool inside = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].starts_with(".SH ")) inside = lines[i] == ".SH " + name;
    if (!inside || lines[i] != ".TP" || i + 1 >= lines.size()) continue;
    // ".B NAME", ".BR A \", \" B", ".BI step( loss ...": every word.
    std::string tag = lines[i + 1];
    for (char& c : tag) {
      if (c == '"' || c == ',' || c == '(' || c == ')') c = ' ';
    }
    std::stringstream words(tag);
    std::string w;
    words >> w;  // the macro
    while (words >> w) tags.insert(w);
  }
  EXPECT_FALSE(tags.empty()) << "pilot-program(7) has no section " << name;
  return tags;
}

std::string NameOf(const std::string& kv) { return kv.substr(0, kv.find('=')); }

std::string Value(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& kv : env) {
    if (NameOf(kv) == name) return kv.substr(name.size() + 1);
  }
  return "(unset)";
}

Config ProgramConfig() {
  Config cfg;
  cfg.program.command = {"python3", "train.py"};
  cfg.program.env = {{"TOKENIZERS_PARALLELISM", "false"}, {"MY_FLAG", "1"}};
  cfg.training.steps = 20;
  cfg.training.alloc_conf = "expandable_segments:True";
  cfg.training.deterministic = true;
  cfg.checkpoint.at_step = 10;
  cfg.run.seq_len = 2048;
  cfg.run.micro_batch = 4;
  return cfg;
}

ProgramEnvInput Input(const Config* cfg) {
  ProgramEnvInput in;
  in.base_env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/alice", "USER=alice",
                 "SLURM_JOB_ID=42", "SLURM_PILOT_ACTIVE=42"};
  in.job_env = {"PATH=/home/alice/venv/bin:/usr/bin", "VIRTUAL_ENV=/home/alice/venv",
                "PYTHONPATH=/home/alice/src", "LD_PRELOAD=/home/alice/evil.so",
                "PYTHONHOME=/home/alice/py", "PYTHONUSERBASE=/home/alice/.local",
                "PYTHONSTARTUP=/home/alice/start.py", "PYTHONNOUSERSITE=",
                "HF_HOME=/scratch/hf", "SECRET_TOKEN=abc", "OMPI_MCA_btl=^openib",
                "PILOT_METRICS=/tmp/forged", "SLURM_PILOT_ACTIVE=7", "SLURM_PROCID=0",
                "SECRET_TOKEN=second"};
  in.cfg = cfg;
  in.probe_path = "/usr/share/slurm-pilot/python";
  in.stage = "node";
  in.process = "resumed";
  in.device = "cuda";
  in.rank = 1;
  in.local_rank = 1;
  in.world_size = 2;
  in.local_world_size = 2;
  in.master_port = 29501;
  in.metrics = "/var/lib/slurm-pilot/jobs/42/metrics/node-resumed-1.fifo";
  in.checkpoint_dir = "/var/lib/slurm-pilot/jobs/42/work/pilot-checkpoints/node";
  in.resume_dir = in.checkpoint_dir;
  in.resume_step = 10;
  in.seed = 1234;
  in.tasks = 2;
  return in;
}

TEST(ProgramDoc, EveryVariableTheSupervisorSetsIsInTheEnvironmentSection) {
  const Config cfg = ProgramConfig();
  const ProgramEnvInput in = Input(&cfg);
  const std::vector<std::string> env = ProgramEnv(in);
  std::set<std::string> given;
  for (const std::string& kv : in.base_env) given.insert(NameOf(kv));
  for (const std::string& kv : in.job_env) {
    // The job's PILOT_* are never passed: the pilot sets its own.
    if (NameOf(kv).rfind("PILOT_", 0) != 0) given.insert(NameOf(kv));
  }
  for (const auto& [k, v] : cfg.program.env) given.insert(k);
  std::set<std::string> set_by_pilot = {"PYTHONPATH", "PYTHONNOUSERSITE"};
  for (const std::string& kv : env) {
    if (!given.contains(NameOf(kv))) set_by_pilot.insert(NameOf(kv));
  }
  for (const char* n : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                        "MASTER_ADDR", "MASTER_PORT", "PILOT_STEPS", "PILOT_CHECKPOINT_STEP",
                        "PILOT_CHECKPOINT_DIR", "PILOT_RESUME_DIR", "PILOT_RESUME_STEP", "PILOT_METRICS", "PILOT_STAGE",
                        "PILOT_PROCESS", "PILOT_DEVICE", "PILOT_SEED", "PILOT_SEQ_LEN",
                        "PILOT_MICRO_BATCH", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF",
                        "PILOT_DETERMINISTIC", "CUBLAS_WORKSPACE_CONFIG"}) {
    EXPECT_TRUE(set_by_pilot.contains(n)) << n << " is not set";
  }
  const std::set<std::string> tags = Tags("ENVIRONMENT");
  for (const std::string& n : set_by_pilot) {
    EXPECT_TRUE(tags.contains(n)) << "pilot-program(7), ENVIRONMENT: " << n << " is not a .TP tag";
  }
}

TEST(ProgramDoc, EveryMetricsFieldIsInTheMetricsRecordSection) {
  const std::set<std::string> tags = Tags("METRICS RECORD");
  ASSERT_GE(MetricFieldNames().size(), 24u);
  for (const std::string& f : MetricFieldNames()) {
    EXPECT_TRUE(tags.contains(f)) << "pilot-program(7), METRICS RECORD: " << f << " is not a .TP tag";
  }
}

TEST(ProgramEnv, ValuesPassThroughAndDrops) {
  const Config cfg = ProgramConfig();
  const std::vector<std::string> env = ProgramEnv(Input(&cfg));
  // Python's ways to load code from outside the pins are not the job's.
  EXPECT_EQ(Value(env, "PYTHONPATH"), "/usr/share/slurm-pilot/python");
  EXPECT_EQ(Value(env, "PYTHONHOME"), "(unset)");
  EXPECT_EQ(Value(env, "PYTHONUSERBASE"), "(unset)");
  EXPECT_EQ(Value(env, "PYTHONSTARTUP"), "(unset)");
  EXPECT_EQ(Value(env, "PYTHONNOUSERSITE"), "1");
  EXPECT_EQ(Value(env, "TOKENIZERS_PARALLELISM"), "false");
  EXPECT_EQ(Value(env, "MY_FLAG"), "1");
  EXPECT_EQ(Value(env, "PATH"), "/home/alice/venv/bin:/usr/bin");
  EXPECT_EQ(Value(env, "VIRTUAL_ENV"), "/home/alice/venv");
  EXPECT_EQ(Value(env, "HF_HOME"), "/scratch/hf");
  // The program is the user's own: the job's whole environment, the
  // first of a name given twice, as srun --export=ALL gives it.
  EXPECT_EQ(Value(env, "LD_PRELOAD"), "/home/alice/evil.so");
  EXPECT_EQ(Value(env, "SECRET_TOKEN"), "abc");
  EXPECT_EQ(Value(env, "OMPI_MCA_btl"), "^openib");
  EXPECT_EQ(Value(env, "HOME"), "/home/alice");
  // What the pilot owns is never the job's.
  EXPECT_EQ(Value(env, "SLURM_PILOT_ACTIVE"), "42");
  EXPECT_EQ(Value(env, "PILOT_METRICS"), "/var/lib/slurm-pilot/jobs/42/metrics/node-resumed-1.fifo");
  // Tasks the supervisor starts in srun's place get srun's task variables.
  EXPECT_EQ(Value(env, "SLURM_PROCID"), "1");
  EXPECT_EQ(Value(env, "SLURM_LOCALID"), "1");
  EXPECT_EQ(Value(env, "SLURM_NTASKS"), "2");
  EXPECT_EQ(Value(env, "PILOT_STEPS"), "20");
  EXPECT_EQ(Value(env, "PILOT_CHECKPOINT_STEP"), "10");
  EXPECT_EQ(Value(env, "PILOT_SEQ_LEN"), "2048");
  EXPECT_EQ(Value(env, "PILOT_MICRO_BATCH"), "4");
  EXPECT_EQ(Value(env, "PILOT_RESUME_DIR"), "/var/lib/slurm-pilot/jobs/42/work/pilot-checkpoints/node");
  EXPECT_EQ(Value(env, "PILOT_STAGE"), "node");
  EXPECT_EQ(Value(env, "PILOT_PROCESS"), "resumed");
  EXPECT_EQ(Value(env, "PILOT_DEVICE"), "cuda");
  EXPECT_EQ(Value(env, "PILOT_SEED"), "1234");
  EXPECT_EQ(Value(env, "RANK"), "1");
  EXPECT_EQ(Value(env, "WORLD_SIZE"), "2");
  EXPECT_EQ(Value(env, "GROUP_RANK"), "0");
  EXPECT_EQ(Value(env, "MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(Value(env, "MASTER_PORT"), "29501");
  EXPECT_EQ(Value(env, "PYTORCH_ALLOC_CONF"), "expandable_segments:True");
  // Each name once.
  std::set<std::string> names;
  for (const std::string& kv : env) EXPECT_TRUE(names.insert(NameOf(kv)).second) << kv;
}

TEST(ProgramEnv, TheReferenceProcessOnACpu) {
  const Config cfg = ProgramConfig();
  ProgramEnvInput in = Input(&cfg);
  in.process = "reference";
  in.resume_dir.clear();
  in.device = "cpu";
  in.job_env = {};
  const std::vector<std::string> env = ProgramEnv(in);
  EXPECT_EQ(Value(env, "PILOT_RESUME_DIR"), "(unset)");
  EXPECT_EQ(Value(env, "PYTORCH_ALLOC_CONF"), "(unset)");  // cuda only
  EXPECT_EQ(Value(env, "PYTHONPATH"), "/usr/share/slurm-pilot/python");
  EXPECT_EQ(Value(env, "PATH"), "/usr/local/bin:/usr/bin:/bin");  // the workload's own
}

// srun starts the tasks (ranks across nodes): it sets their task
// variables, the supervisor does not.
TEST(ProgramEnv, SrunSetsTheTaskVariables) {
  const Config cfg = ProgramConfig();
  ProgramEnvInput in = Input(&cfg);
  in.tasks = 0;
  const std::vector<std::string> env = ProgramEnv(in);
  EXPECT_EQ(Value(env, "SLURM_PROCID"), "0");  // the job's, for srun to replace
  EXPECT_EQ(Value(env, "SLURM_NTASKS"), "(unset)");
}

// program.env's PYTHONPATH (pinned with the config) is the only one, and
// the probe stays first: without it `import slurm_pilot` fails. The user's
// site folder stays off whatever program.env says.
TEST(ProgramEnv, ProgramEnvPythonPathKeepsTheProbeFirst) {
  Config cfg = ProgramConfig();
  cfg.program.env["PYTHONPATH"] = "src:lib";
  cfg.program.env["PYTHONUSERBASE"] = "/home/alice/.local";
  cfg.program.env["PYTHONNOUSERSITE"] = "";
  const std::vector<std::string> env = ProgramEnv(Input(&cfg));
  EXPECT_EQ(Value(env, "PYTHONPATH"), "/usr/share/slurm-pilot/python:src:lib");
  EXPECT_EQ(Value(env, "PYTHONUSERBASE"), "/home/alice/.local");
  EXPECT_EQ(Value(env, "PYTHONNOUSERSITE"), "1");
}

// training.deterministic: the probe's switch for every process, and
// cuBLAS's fixed workspace on a GPU unless the job fixed its own; neither
// without it (a job's PILOT_DETERMINISTIC is the pilot's to set, never passed).
TEST(ProgramEnv, DeterministicKernelsWhenTheConfigAsks) {
  Config cfg = ProgramConfig();
  ProgramEnvInput in = Input(&cfg);
  std::vector<std::string> env = ProgramEnv(in);
  EXPECT_EQ(Value(env, "PILOT_DETERMINISTIC"), "1");
  EXPECT_EQ(Value(env, "CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
  in.job_env.push_back("CUBLAS_WORKSPACE_CONFIG=:16:8");
  env = ProgramEnv(in);
  EXPECT_EQ(Value(env, "CUBLAS_WORKSPACE_CONFIG"), ":16:8");
  in.device = "cpu";
  env = ProgramEnv(in);
  EXPECT_EQ(Value(env, "PILOT_DETERMINISTIC"), "1");
  cfg.training.deterministic = false;
  in.device = "cuda";
  in.job_env = {"PILOT_DETERMINISTIC=1"};
  env = ProgramEnv(in);
  EXPECT_EQ(Value(env, "PILOT_DETERMINISTIC"), "(unset)");
  EXPECT_EQ(Value(env, "CUBLAS_WORKSPACE_CONFIG"), "(unset)");
}

}  // namespace
}  // namespace pilot::supervisor
