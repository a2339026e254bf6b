#include "supervisor/program/bound_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "core/config/load.h"
#include "core/records/lock.h"
#include "job/binding.h"
#include "job/job_env.h"
#include "job/state_layout.h"
#include "job/subprocess.h"
#include "launch/container.h"
#include "launch/launcher.h"
#include "supervisor/program/container.h"
#include "supervisor/program/group.h"
#include "supervisor/program/phase_layout.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

// The record of the newest complete checkpoint, in PILOT_CHECKPOINT_DIR
// (python/slurm_pilot/_resume.py writes it).
constexpr char kResumeFile[] = "pilot-resume.json";
constexpr char kResumeSchema[] = "slurm-pilot/resume/1";

class BoundRun {
 public:
  BoundRun(const SuperviseOptions& o, int64_t pilot)
      : o_(o), pilot_(pilot), layout_(o.policy.state_dir, o.policy.work_root) {}

  int Run() {
    if (!Load()) return 1;
    Config run = cfg_;
    // The run's length and its checkpoints' interval, not the pilot's.
    run.training.steps =
        static_cast<int>(std::min<int64_t>(cfg_.RunTotalSteps(), std::numeric_limits<int>::max()));
    run.checkpoint.at_step = static_cast<int>(
        std::min<int64_t>(cfg_.run.checkpoint_interval, std::numeric_limits<int>::max()));
    // This job's GPUs and nodes, not those of the pilot's node.
    Lock here = lock_;
    here.job.gpus.reset();
    const ProgramPlacement place = PlaceProgram(run, here, o_.job_env);
    const launch::NodeLayout& layout = place.node;
    if (layout.Uneven()) {
      return Fail(std::to_string(layout.world) +
                  " ranks (parallel.nproc) do not divide evenly over the job's " +
                  std::to_string(layout.hosts.size()) +
                  " nodes; ask for a multiple of the node count");
    }
    const std::string workdir = !cfg_.program.workdir.empty()   ? cfg_.program.workdir
                                : !lock_.job.submit_dir.empty() ? lock_.job.submit_dir
                                                                : "/";
    const std::string out =
        !o_.out.empty() ? o_.out : o_.cwd + "/pilot-run-" + std::to_string(o_.job_id);
    std::optional<ContainerSetup> container;
    if (cfg_.container.runtime != "none") {
      // Across nodes, podman and Apptainer run each task through the
      // node's plugin, which checks it against root's record of a pilot
      // job on that node (container_task.h): a bound job has none yet.
      if (layout.AcrossNodes() && cfg_.container.runtime != launch::kRuntimePyxis) {
        return Fail(
            "a bound run in a " + cfg_.container.runtime +
            " image across nodes is not supported yet: run it on one node (-N1), or with pyxis");
      }
      Result<ContainerSetup> c =
          MakeContainerSetup(run, lock_, o_.policy, o_.run_as, workdir, place.gpus,
                             {out, ResolveProbePath(o_.policy), workdir}, "");
      if (!c.ok()) return Fail(c.status().detail());
      container = *std::move(c);
    }
    WorkloadEnvInput we;
    we.job_env = o_.job_env;
    we.allow_test_switches = o_.policy.allow_test_switches;
    we.job_id = o_.job_id;
    we.instance = lock_.instance;
    we.user = o_.run_as ? o_.run_as->user : lock_.job.user;
    we.home = o_.home;
    PhaseLaunchInput pl;
    pl.cfg = &run;
    pl.lock = &lock_;
    pl.base_env = BuildWorkloadEnv(we).env;
    pl.job_env = o_.job_env;
    pl.probe_path = ResolveProbePath(o_.policy);
    pl.layout = &layout;
    pl.container = container ? &*container : nullptr;
    pl.device = place.device;
    pl.stage = "run";
    pl.process = "run";
    pl.records = false;
    pl.checkpoint_dir = out + "/checkpoints";
    // A requeued run resumes from the newest checkpoint the program marked
    // complete (pilot-program(7)).
    Result<int64_t> resume = ResumeStep(pl.checkpoint_dir);
    if (!resume.ok()) return Fail(resume.status().detail());
    if (*resume > 0) {
      pl.resume_dir = pl.checkpoint_dir;
      pl.resume_step = *resume;
    }
    PhaseLaunch launch = PhaseRanks(pl);
    if (!launch.problems.empty()) return Fail(launch.problems.front());
    GroupSpec spec;
    spec.ranks = std::move(launch.ranks);
    spec.run_as = o_.run_as;
    spec.cwd = workdir;
    spec.records = false;
    spec.expected_ranks = layout.world;
    spec.process_per_rank = layout.kind == launch::kLocal;
    spec.step_timeout_seconds = std::numeric_limits<double>::infinity();
    Log("the run of pilot " + std::to_string(pilot_) + " (" + cfg_.run.name +
        "): " + launch.description + " in " + workdir + ", " + std::to_string(run.training.steps) +
        " steps, checkpoints in " + pl.checkpoint_dir + " every " +
        std::to_string(run.checkpoint.at_step) + " steps" +
        (pl.resume_step > 0 ? ", resuming after step " + std::to_string(pl.resume_step) : ""));
    const GroupResult g = RunGroup(spec);
    return ExitStatus(g);
  }

 private:
  // The run record, the pilot's lock and its pinned config; false (the
  // reason on stderr) when the job may not run as the pilot's run.
  bool Load() {
    const uid_t uid = o_.run_as ? o_.run_as->uid : ::geteuid();
    Result<job::RunRecord> rec = job::ReadRunRecordOf(layout_.RunFile(o_.job_id), o_.job_id, uid);
    if (!rec.ok()) return Fail(rec.status().detail()) == 0;
    if (rec->decision != job::kRunAdmitted || rec->pilot_job != pilot_) {
      return Fail("its run record does not admit it as the run of pilot " +
                  std::to_string(pilot_)) == 0;
    }
    const std::string lock_path = layout_.Job(pilot_).lock;
    Result<Lock> lock = ReadLock(lock_path);
    if (!lock.ok())
      return Fail("the lock of pilot " + std::to_string(pilot_) + ": " + lock.status().Message()) ==
             0;
    lock_ = std::move(lock).value();
    if (lock_.job.uid != uid)
      return Fail("pilot " + std::to_string(pilot_) + " is another user's") == 0;
    Result<std::string> text = ReadFileLimited(lock_.config.copy, 1 << 20);
    if (!text.ok()) return Fail("the pilot's config: " + text.status().Message()) == 0;
    if (Sha256Hex(*text) != lock_.config.sha256_copied) {
      return Fail("the pilot's config copy " + lock_.config.copy +
                  " is not the one its lock pinned") == 0;
    }
    // Its variables as the prolog's binding check expanded them: this job's
    // id and user, the pilot's config path and submit folder.
    Result<Config> cfg = job::ParseLockedConfig(*text, lock_, o_.job_id, o_.home);
    if (!cfg.ok()) return Fail("the pilot's config: " + cfg.status().Message()) == 0;
    cfg_ = std::move(cfg).value();
    if (!cfg_.IsProgram()) {
      return Fail("pilot " + std::to_string(pilot_) +
                  " ran the builtin model: only a program pilot's run ([program] in pilot.toml) is "
                  "bound to its grant yet (spank_pilot(8), BINDING)") == 0;
    }
    return true;
  }

  // The step of the newest checkpoint the program marked complete in `dir`
  // (DIR/pilot-resume.json, {"schema": ..., "step": N}, read as the job's user: the folder
  // is the user's); 0 when there is none (a first start). Errors: kInvalid
  // (a record that does not read), the detail a sentence with the way out.
  Result<int64_t> ResumeStep(const std::string& dir) const {
    const std::string path = dir + "/" + kResumeFile;
    job::CommandSpec spec;
    spec.argv = {"/bin/cat", "--", path};
    spec.env = {"PATH=/usr/bin:/bin", "LANG=C"};
    spec.run_as = o_.run_as;
    spec.timeout_seconds = 30;
    spec.max_output_bytes = 4096;
    Result<job::CommandResult> read = job::RunCommand(spec);
    if (!read.ok()) return Status::Invalid("resume", path + ": " + read.status().Message());
    if (!read->Succeeded()) {
      if (read->err.find("No such file") != std::string::npos) return int64_t{0};
      return Status::Invalid("resume", path + ": cannot be read as the user (" +
                                           std::string(Trim(read->err)) +
                                           "); remove it to start the run from step 1");
    }
    Result<Json> j = ParseJsonText(read->out, path, 4096);
    const bool good = j.ok() && j->is_object() && j->size() == 2 && j->contains("schema") &&
                      (*j)["schema"] == kResumeSchema && j->contains("step") &&
                      (*j)["step"].is_number_integer() && (*j)["step"].get<int64_t>() >= 1;
    if (!good) {
      return Status::Invalid("resume",
                             path + ": expected {\"schema\": \"" + std::string(kResumeSchema) +
                                 "\", \"step\": N} with N >= 1, as slurm_pilot.saved() writes it; "
                                 "remove it to start the run from step 1");
    }
    return (*j)["step"].get<int64_t>();
  }

  // The first process that did not exit 0 (by its rank), as a shell says it.
  int ExitStatus(const GroupResult& g) {
    for (const RankResult& r : g.ranks) {
      if (!r.started) {
        Log("rank " + std::to_string(r.rank) + " did not start: " + r.start_problem);
        return 1;
      }
    }
    for (const RankResult& r : g.ranks) {
      const int status = r.signal != 0 ? 128 + r.signal : r.exit_code;
      if (status != 0) {
        Log("the run ended: rank " + std::to_string(r.rank) +
            (r.signal != 0 ? " killed by signal " + std::to_string(r.signal)
                           : " exited " + std::to_string(status)) +
            (g.stopped ? " (the job was cancelled, requeued or reached its time limit)" : ""));
        return status;
      }
    }
    Log("the run ended: every process exited 0");
    return 0;
  }

  void Log(const std::string& line) const {
    std::fprintf(stderr, "pilot: job %lld: %s\n", static_cast<long long>(o_.job_id), line.c_str());
  }
  int Fail(const std::string& why) const {
    Log("not run: " + why);
    return 1;
  }

  const SuperviseOptions& o_;
  const int64_t pilot_;
  const job::StateLayout layout_;
  Lock lock_;
  Config cfg_;
};

}  // namespace

int RunBoundRun(const SuperviseOptions& opts, int64_t pilot_job) {
  return BoundRun(opts, pilot_job).Run();
}

}  // namespace pilot::supervisor
