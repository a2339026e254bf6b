#include "supervisor/supervise.h"

#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/base/atomic_file.h"
#include "core/records/checkpoint_meta.h"
#include "core/records/exit_codes.h"
#include "core/config/config.h"
#include "core/config/load.h"
#include "core/base/crypto.h"
#include "core/records/lock.h"
#include "core/decide/restore_check.h"
#include "core/records/results.h"
#include "core/base/rfc3339.h"
#include "core/base/strings.h"
#include "job/job_env.h"
#include "job/job_user_file.h"
#include "job/node_facts.h"
#include "job/reserve.h"
#include "job/state_layout.h"
#include "pilot/version.h"
#include "supervisor/device_memory.h"
#include "supervisor/process.h"
#include "core/records/hostlist.h"
#include "supervisor/program/program_pilot.h"
#include "supervisor/work_guard.h"
#include "supervisor/work_on_nodes.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

std::string Now() {
  return FormatRfc3339(std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
}

void LogSupervise(const std::string& line) { std::fprintf(stderr, "pilot: supervisor: %s\n", line.c_str()); }

class Supervisor {
 public:
  explicit Supervisor(const SuperviseOptions& o)
      : o_(o),
        layout_(o.policy.state_dir, o.policy.work_root),
        paths_(layout_.Job(o.job_id)) {}

  int Run() {
    const auto t0 = std::chrono::steady_clock::now();
    info_.version = PILOT_VERSION_STRING;
    info_.started_at = Now();
    res_.started_at = info_.started_at;
    Result<Lock> lock = ReadLock(paths_.lock);
    if (!lock.ok()) {
      LogSupervise("no usable lock: " + lock.status().Message());
      return kExitUsage;
    }
    lock_ = std::move(lock).value();
    res_.instance = lock_.instance;
    res_.config_path = lock_.config.copy;
    res_.lock_path = paths_.lock;
    out_ = o_.out.empty() ? paths_.work : o_.out;
    guard_.emplace(layout_, paths_.work, static_cast<int64_t>(o_.policy.state_floor_mb) << 20);
    LoadConfig();
    BuildEnv();
    info_.ptrace_scope = job::PtraceScope();
    if (info_.ptrace_scope < 1) {
      LogSupervise("note: kernel.yama.ptrace_scope is " +
          (info_.ptrace_scope < 0 ? std::string("absent") : std::to_string(info_.ptrace_scope)) +
          ": any process of the user can attach to the workload");
    }

    int rc = kExitOk;
    if (cfg_ && cfg_->IsProgram()) {
      rc = Program();
    } else {
      if (o_.stage != "node") rc = SingleAndRestore();
      if (!StopRequested() && (o_.stage == "node" || (o_.stage == "all" && rc == kExitOk))) {
        rc = Node();
      }
    }
    if (StopRequested()) {
      info_.stopped = true;
      rc = kExitError;
      LogSupervise(info_.stopped_reason.empty() ? "stopped (the job was cancelled or reached its time limit)"
                                                : "stopped: " + info_.stopped_reason);
    }
    res_.exit_code = rc;
    info_.finished_at = Now();
    res_.finished_at = info_.finished_at;
    info_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    info_.device_memory_source = sampler_.source();
    info_.device_memory = SamplesOf(sampler_.peaks(), JobGpuList(lock_, o_.job_env));
    res_.supervisor = info_;
    // Root's, readable by the job's user only (job/job_user_file.h): the
    // program's command line and the ends of its output are the user's.
    // On a full state file system the reserve is released for it once.
    const uid_t uid = o_.run_as ? o_.run_as->uid : ::geteuid();
    const gid_t gid = o_.run_as ? o_.run_as->gid : ::getegid();
    Status w = job::WriteJobUserFile(layout_, paths_.results, ResultsToJson(res_), uid, gid, LogSupervise);
    if (!w.ok()) {
      LogSupervise("cannot write results: " + w.ToString());
      return kExitError;
    }
    LogSupervise("results in " + paths_.results + " (exit " + std::to_string(rc) + ")");
    return rc;
  }

 private:
  // While the workload runs: the GPUs' memory, and the work folder's space
  // on the state file system (work_guard.h), which ends the pilot when due.
  void Tick() {
    sampler_.Sample();
    if (!guard_ || !info_.stopped_reason.empty()) return;
    if (std::optional<std::string> why = guard_->Check()) {
      info_.stopped_reason = *why;
      LogSupervise("ending the pilot: " + *why);
      RequestStop();
    }
  }

  void LoadConfig() {
    Result<std::string> text = ReadFileLimited(lock_.config.copy, 1 << 20);
    if (!text.ok()) return;
    Result<Config> cfg = job::ParseLockedConfig(*text, lock_, o_.job_id, o_.home);
    if (cfg.ok()) cfg_ = std::move(cfg).value();
  }

  void BuildEnv() {
    WorkloadEnvInput in;
    in.job_env = o_.job_env;
    in.allow_test_switches = o_.policy.allow_test_switches;
    in.job_id = o_.job_id;
    in.instance = lock_.instance;
    in.user = o_.run_as ? o_.run_as->user : lock_.job.user;
    in.home = o_.home;
    env_ = BuildWorkloadEnv(in);
    info_.environment = env_.passed;
    info_.test_switches = env_.test_switches;
    for (const std::string& name : env_.test_switches) LogSupervise("test switch passed (policy allows): " + name);
  }

  std::vector<std::string> BaseArgs() const {
    return {o_.runner, "run", "--config", lock_.config.copy, "--lock", paths_.lock,
            "--out",   out_,  "--report-fd", std::to_string(kReportFd),
            "--memory-headroom", FormatFixed(o_.policy.thresholds.memory_headroom, 4)};
  }

  // Runs one phase; its parsed report, or why there is none.
  Result<Results> Phase(const std::string& role, std::vector<std::string> argv, int* rc) {
    WorkloadSpec spec;
    spec.argv = std::move(argv);
    spec.env = env_.env;
    spec.run_as = o_.run_as;
    spec.cwd = o_.cwd;
    spec.max_report_bytes = kResultsMaxBytes;
    SupervisedProcess p;
    p.role = role;
    Result<WorkloadOutcome> out = RunWorkload(spec, [this] { Tick(); });
    if (!out.ok()) {
      p.report_problem = "not started: " + out.status().Message();
      info_.processes.push_back(p);
      *rc = kExitError;
      return out.status();
    }
    p.exit_code = out->exit_code;
    p.signal = out->signal;
    p.wall_seconds = out->wall_seconds;
    p.report_bytes = static_cast<int64_t>(out->report.size());
    *rc = out->signal != 0 ? kExitError : out->exit_code;
    Result<Results> report = Status::Invalid(role, "no report");
    if (out->report_too_large) {
      report = Status::Invalid(role, "report larger than " + std::to_string(kResultsMaxBytes) + " bytes");
    } else if (out->report.empty()) {
      report = Status::Invalid(role, "the process wrote no report" +
                                         std::string(out->signal ? " (killed by signal " +
                                                                       std::to_string(out->signal) + ")"
                                                                 : ""));
    } else {
      report = ParseResults(out->report, role + " report");
    }
    if (!report.ok()) p.report_problem = report.status().Message();
    info_.processes.push_back(p);
    LogSupervise(role + ": exit " + (out->signal ? "signal " + std::to_string(out->signal) : std::to_string(out->exit_code)) +
        " after " + FormatFixed(out->wall_seconds, 1) + " s" +
        (report.ok() ? "" : "; " + report.status().Message()));
    return report;
  }

  // sha256 of the checkpoint's manifest, read as the job's user.
  void HashManifest(const std::string& checkpoint) {
    if (checkpoint.empty()) return;
    info_.checkpoint_manifest_sha256 = job::Sha256AsUser(
        job::RunCommand, checkpoint + "/" + kManifestFileName, o_.run_as, lock_.job.user, o_.home);
    if (info_.checkpoint_manifest_sha256.empty()) {
      LogSupervise("cannot hash the checkpoint's manifest in " + checkpoint);
    }
  }

  int SingleAndRestore() {
    std::vector<std::string> argv = BaseArgs();
    for (const char* a : {"--stage", "single", "--supervised"}) argv.push_back(a);
    int rc = kExitOk;
    Result<Results> single = Phase("single", argv, &rc);
    if (!single.ok()) return rc == kExitOk ? kExitError : rc;
    res_.versions = single->versions;
    res_.config_sha256 = single->config_sha256;
    res_.seed = single->seed;
    res_.alloc_conf = single->alloc_conf;
    res_.single = single->single;
    if (rc != kExitOk || !res_.single) return rc == kExitOk ? kExitError : rc;
    SingleStage& st = *res_.single;
    if (st.status != "ok" || st.checkpoint.path.empty()) return kExitError;
    HashManifest(st.checkpoint.path);
    if (StopRequested()) return kExitError;
    if (!cfg_) {
      st.restore.detail = "the supervisor could not read the config copy";
      return kExitError;
    }
    std::vector<std::string> resume = BaseArgs();
    for (const std::string& a : {std::string("--resume-from"), st.checkpoint.path,
                                 std::string("--reference"), out_ + "/" + kReferenceParamsFile,
                                 std::string("--supervised")}) {
      resume.push_back(a);
    }
    int child_rc = kExitOk;
    Result<Results> child = Phase("restore", resume, &child_rc);
    const bool equal = JudgeRestore(*cfg_, st.device == "cuda", child_rc, child, &st);
    info_.restore_compared = true;
    LogSupervise(std::string("restore ") + (equal ? "equal" : "NOT equal") +
        (st.restore.detail.empty() ? "" : ": " + st.restore.detail));
    if (child_rc == kExitOutOfMemory) return kExitOutOfMemory;
    return equal ? kExitOk : kExitFailed;
  }

  // The user's own program ([program]): supervisor/program/program_pilot.h.
  int Program() {
    res_.config_sha256 = lock_.config.sha256_copied;
    res_.seed = lock_.seeds.training;
    res_.versions.runner = PILOT_VERSION_STRING;
    res_.alloc_conf = cfg_->training.alloc_conf;
    ProgramPilotInput in;
    in.cfg = &*cfg_;
    in.lock = &lock_;
    in.opts = &o_;
    in.base_env = env_.env;
    in.out = out_;
    in.job = paths_;
    in.tick = [this] { Tick(); };
    in.device_utilization = [this](std::chrono::steady_clock::time_point from,
                                   std::chrono::steady_clock::time_point to) {
      return sampler_.MeanUtilization(from, to, SamplesOf(sampler_.peaks(), JobGpuList(lock_, o_.job_env)));
    };
    const int rc = RunProgramPilot(in, &res_, &info_);
    // The driver the program ran on, as root's NVML reads it.
    if (res_.versions.cuda_driver.empty()) res_.versions.cuda_driver = sampler_.driver_version();
    return rc;
  }

  int Node() {
    // Ranks across nodes (srun) write their reports and shards into the
    // work folder: every node must have it.
    Result<std::vector<std::string>> hosts = pilot::ExpandHostlist(EnvValue(o_.job_env, "SLURM_JOB_NODELIST"));
    if (cfg_ && cfg_->parallel.launcher != "local" && hosts.ok() && hosts->size() > 1) {
      WorkOnNodesInput w{o_.run_as, env_.env, *hosts, out_};
      if (std::optional<std::string> missing = WorkFolderMissing(w, LogSupervise)) {
        NodeStage n;
        n.status = "error";
        n.mode = cfg_->parallel.mode;
        n.launcher = "srun";
        n.world_size = cfg_->parallel.nproc;
        n.failure = NodeFailure{"train", std::nullopt, *missing};
        res_.node = n;
        LogSupervise("problem: " + *missing);
        return kExitFailed;
      }
    }
    std::vector<std::string> argv = BaseArgs();
    for (const char* a : {"--stage", "node"}) argv.push_back(a);
    if (res_.single && res_.single->tokens_per_second > 0) {
      argv.push_back("--single-tokens-per-second");
      argv.push_back(FormatFixed(res_.single->tokens_per_second, 3));
    }
    int rc = kExitOk;
    Result<Results> node = Phase("node", argv, &rc);
    if (!node.ok()) return rc == kExitOk ? kExitError : rc;
    if (!res_.single) {
      res_.versions = node->versions;
      res_.config_sha256 = node->config_sha256;
      res_.seed = node->seed;
      res_.alloc_conf = node->alloc_conf;
    }
    res_.node = node->node;
    return rc;
  }

  const SuperviseOptions& o_;
  job::StateLayout layout_;
  job::JobPaths paths_;
  Lock lock_;
  std::optional<Config> cfg_;
  std::string out_;
  WorkloadEnv env_;
  Results res_;
  SupervisorInfo info_;
  DeviceMemorySampler sampler_;
  std::optional<WorkGuard> guard_;
};

}  // namespace

int Supervise(const SuperviseOptions& opts) { return Supervisor(opts).Run(); }

}  // namespace pilot::supervisor
