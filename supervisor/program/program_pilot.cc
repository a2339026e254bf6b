#include "supervisor/program/program_pilot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "core/base/atomic_file.h"
#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "core/records/exit_codes.h"
#include "core/records/hostlist.h"
#include "core/records/python_error.h"
#include "job/safe_read.h"
#include "launch/container.h"
#include "launch/launcher.h"
#include "launch/rank_env.h"
#include "launch/spawn.h"
#include "launch/srun.h"
#include "supervisor/cgroup.h"
#include "supervisor/process.h"
#include "supervisor/program/container.h"
#include "supervisor/program/group.h"
#include "supervisor/program/judge.h"
#include "supervisor/program/observe.h"
#include "supervisor/work_on_nodes.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

// The program is the user's own code running as the user: it gets the
// job's whole environment, as srun's --export=ALL gives it (the site's MPI,
// fabric and accelerator variables, tokens, caches), so that a program that
// runs in the job runs in the pilot. What the pilot owns is not the job's
// to set: its own PILOT_* variables, the supervisor's SLURM_PILOT_* and the
// rank variables each process gets. The pilot's own helpers that run as the
// user (listing and verifying the checkpoint) keep a clean environment.
bool PilotOwned(std::string_view name) {
  return name.substr(0, 6) == "PILOT_" || name.substr(0, 12) == "SLURM_PILOT_";
}

void Log(const std::string& line) { std::fprintf(stderr, "pilot: supervisor: %s\n", line.c_str()); }

// Keeps the larger of *peak and `v`.
void RaisePeak(std::optional<int64_t>* peak, const std::optional<int64_t>& v) {
  if (v && (!*peak || *v > **peak)) *peak = v;
}

// When the reference process had saved the checkpoint of step `k`: the
// arrival of each rank's first record past k (the latest of them), on the
// system clock. nullopt when no rank reported a step past k.
std::optional<double> SavedBy(const GroupResult& g, int64_t k) {
  std::map<int, double> first;
  for (const MetricRecord& r : g.records) {
    if (r.step > k) first.emplace(r.rank.value_or(0), r.arrived);
  }
  if (first.empty()) return std::nullopt;
  double t = 0;
  for (const auto& [rank, at] : first) t = std::max(t, at);
  return g.started_unix + t;
}

// DIR/REL's status changed after `t` (seconds since the epoch). A file the
// supervisor cannot look at counts as not changed.
bool ChangedAfter(const std::string& dir, const std::string& rel, std::optional<double> t) {
  if (!t) return false;
  Result<struct stat> st = job::StatBeneath(dir, rel);
  if (!st.ok()) return false;
  const double ctime = static_cast<double>(st->st_ctim.tv_sec) + st->st_ctim.tv_nsec * 1e-9;
  return ctime > *t;
}

int CountList(const std::string& list) {
  if (Trim(list).empty()) return 0;
  return static_cast<int>(std::count(list.begin(), list.end(), ',')) + 1;
}

class ProgramPilot {
 public:
  ProgramPilot(const ProgramPilotInput& in, Results* res, SupervisorInfo* info)
      : in_(in), cfg_(*in.cfg), res_(*res), info_(*info) {}

  int Run() {
    res_.workload = "program";
    ProgramInfo& p = program_;
    p.command = cfg_.program.command;
    p.workdir = cfg_.program.workdir.empty() ? in_.lock->job.submit_dir : cfg_.program.workdir;
    if (p.workdir.empty()) p.workdir = "/";
    p.launcher = cfg_.program.launcher;
    p.metrics = cfg_.program.loss_pattern.empty() ? "records" : "loss_pattern";
    if (!cfg_.program.loss_pattern.empty()) pattern_.emplace(cfg_.program.loss_pattern);
    // The lock's list (slurmd's, through the prolog); without one, the
    // job's CUDA_VISIBLE_DEVICES sets only how many ranks start.
    std::string gpus = JobGpuList(*in_.lock, in_.opts->job_env);
    if (gpus.empty()) gpus = EnvValue(in_.opts->job_env, "CUDA_VISIBLE_DEVICES");
    const int gpu_count = CountList(gpus);
    device_ = cfg_.training.device;
    if (device_ == "auto") device_ = gpu_count > 0 ? "cuda" : "cpu";

    // Ranks across the job's nodes when it has several and the supervisor
    // starts the ranks (launcher "none" starts its own, on this node).
    if (cfg_.program.launcher != "none") {
      Result<std::vector<std::string>> hosts =
          pilot::ExpandHostlist(EnvValue(in_.opts->job_env, "SLURM_JOB_NODELIST"));
      if (hosts.ok() && hosts->size() > 1) hosts_ = std::move(hosts).value();
    }
    const int nodes = std::max<int>(1, static_cast<int>(hosts_.size()));
    world_ = cfg_.parallel.nproc > 0
                 ? cfg_.parallel.nproc
                 : launch::DefaultNodeProcesses(device_ == "cuda", gpu_count,
                                                std::atoi(EnvValue(in_.opts->job_env, "SLURM_NTASKS_PER_NODE").c_str()),
                                                nodes);
    program_.memory_limit_bytes = MemoryLimitBytes();
    metrics_dir_ = in_.job.metrics;
    ::mkdir(metrics_dir_.c_str(), 0711);
    ::chmod(metrics_dir_.c_str(), 0711);
    int rc = kExitOk;
    const std::string& stage = in_.opts->stage;
    if (cfg_.container.runtime != "none" && !PrepareContainer(gpus)) {
      res_.program = program_;
      return kExitFailed;
    }
    if (stage != "node") rc = Single();
    if (!StopRequested() && world_ > 1 && (stage == "node" || (stage == "all" && rc == kExitOk))) {
      const int node_rc = Node();
      if (rc == kExitOk) rc = node_rc;
    }
    if (container_) {
      program_.container = ReadBackContainer(*container_, program_.processes);
      // An image that never started is named by what its runtime said.
      if (program_.container->digest.empty()) {
        const std::string why = ContainerStartFailure(container_->runtime, program_.processes);
        if (!why.empty()) program_.container->problem = why + "; " + program_.container->problem;
      }
    }
    res_.program = program_;
    return rc;
  }

 private:
  // [container] runtime: checks that the program can run in the pinned
  // image here and sets up container_; false (the reason a problem and the
  // single stage's failure) when it cannot.
  bool PrepareContainer(const std::string& gpus) {
    std::string why = ContainerProblem(cfg_, *in_.lock, in_.opts->policy);
    Result<ContainerSetup> c = Status::Invalid("container", why);
    if (why.empty()) {
      c = MakeContainerSetup(
          cfg_, *in_.lock, in_.opts->policy, in_.opts->run_as, program_.workdir, gpus,
          {in_.out, metrics_dir_, ResolveProbePath(in_.opts->policy), program_.workdir},
          metrics_dir_);
      if (!c.ok()) why = c.status().detail();
    }
    if (!why.empty()) {
      Problem(why);
      SingleStage s;
      s.status = "error";
      FailureInfo f;
      f.kind = "error";
      f.phase = "reference";
      f.message = why;
      s.failure = f;
      s.restore.detail = "not run: " + why;
      res_.single = s;
      return false;
    }
    container_ = *std::move(c);
    Log("container: " + container_->runtime + " " + container_->image);
    return true;
  }

  // The argv of the one srun step that runs `world` ranks over the job's
  // nodes: each task sets torchrun's variables from srun's and, without a
  // loss pattern, writes its records on its stdout (srun --label names the
  // rank). In an image, pyxis's options on the step, or the step marked
  // for each node's plugin (container_task.h); `env` is the step's.
  std::vector<std::string> AcrossNodesStep(int world, std::vector<std::string>* env) {
    launch::SrunStep step;
    step.tasks = world;
    step.nodes = static_cast<int>(hosts_.size());
    step.label = true;
    step.command = launch::TorchrunTaskCommand(cfg_.program.command);
    if (container_ && container_->runtime == launch::kRuntimePyxis) {
      Result<std::vector<std::string>> flags = PyxisStep(*container_, env);
      if (!flags.ok()) {
        Problem(flags.status().ToString());
        return {"/bin/false"};  // the phase fails on its own exit status
      }
      step.options = *std::move(flags);
    } else if (container_) {
      MarkContainerStep(*container_, cfg_, env);
    }
    return launch::SrunStepArgv(step);
  }

  std::string CheckpointDir(const std::string& stage) const {
    return in_.out + "/pilot-checkpoints/" + stage;
  }

  // The socket a phase's processes write their records to: root's folder
  // (0711), the user's socket (0600), made and removed by RunGroup.
  std::string SocketPath(const std::string& stage, const std::string& process) const {
    return metrics_dir_ + "/" + stage + "-" + process + ".sock";
  }

  GroupResult RunPhase(const std::string& stage, const std::string& process, int world,
                       int64_t first_step, const std::string& checkpoint_dir,
                       const std::string& resume_dir,
                       const std::vector<std::string>& watch_files = {}) {
    GroupSpec spec;
    spec.run_as = in_.opts->run_as;
    spec.cwd = program_.workdir;
    spec.step_timeout_seconds = cfg_.program.step_timeout;
    // A process that did not exit by itself is not completed: it gets as
    // long after the last step as a step may take (a final save).
    spec.last_step_grace_seconds = cfg_.program.step_timeout;
    spec.loss_pattern = pattern_;
    spec.first_step = first_step;
    spec.last_step = cfg_.training.steps;
    spec.expected_ranks = world;
    spec.max_records = std::min<int64_t>(
        2000000, 4 * int64_t{cfg_.training.steps} * std::max(1, world) + 1000);
    spec.tick = in_.tick;
    const bool across = stage == "node" && AcrossNodes();
    const bool one_process = cfg_.program.launcher == "none" || across;
    const int processes = one_process ? 1 : world;
    spec.process_per_rank = !one_process;
    if (!across) spec.metrics_socket = SocketPath(stage, process);
    spec.watch_files = watch_files;
    const int local_world = across ? world / static_cast<int>(hosts_.size()) : world;
    const int port = launch::FreePort();
    for (int rank = 0; rank < processes; ++rank) {
      RankLaunch r;
      r.rank = rank;
      r.argv = cfg_.program.command;
      ProgramEnvInput e;
      e.base_env = in_.base_env;
      e.job_env = in_.opts->job_env;
      e.cfg = &cfg_;
      e.probe_path = ResolveProbePath(in_.opts->policy);
      e.stage = stage;
      e.process = process;
      e.device = device_;
      e.rank = rank;
      e.local_rank = rank;
      e.world_size = world;
      e.local_world_size = local_world;
      if (across) e.master_addr = hosts_.front();
      e.master_port = port;
      e.metrics = !across ? spec.metrics_socket : pattern_ ? "" : "stdout";
      e.checkpoint_dir = checkpoint_dir;
      e.resume_dir = resume_dir;
      e.seed = in_.lock->seeds.training;
      e.tasks = across ? 0 : processes;
      r.env = ProgramEnv(e);
      if (world > 1 && EnvValue(in_.opts->job_env, "OMP_NUM_THREADS").empty()) {
        SetEnvValue(&r.env, "OMP_NUM_THREADS", "1");  // as torchrun: ranks share the cores
      }
      if (across) {
        r.srun_tasks = world;
        r.argv = AcrossNodesStep(world, &r.env);
      } else if (container_) {
        const std::string name = "pilot-" + std::to_string(in_.lock->job.id) + "-" +
                                 in_.lock->instance.substr(0, 8) + "-" + stage + "-" + process + "-" +
                                 std::to_string(rank);
        const Status wrapped = WrapInContainer(*container_, name, &r);
        if (!wrapped.ok()) {
          Problem(wrapped.ToString());
          r.argv = {"/bin/false"};  // the phase fails on its own exit status
        }
      }
      spec.ranks.push_back(std::move(r));
    }
    Log(stage + " " + process + ": starting " +
        (across ? std::to_string(world) + " ranks on " + Join(hosts_, ",") + " through srun"
                : std::to_string(processes) + " process" + (processes > 1 ? "es" : "")) +
        " of " + Join(cfg_.program.command, " ") + " in " + spec.cwd);
    GroupResult g = RunGroup(spec);
    for (const RankResult& r : g.ranks) {
      ProgramProcess pp;
      pp.stage = stage;
      pp.process = process;
      pp.rank = r.rank;
      pp.exit_code = r.exit_code;
      pp.signal = r.signal;
      pp.terminated = r.terminated;
      pp.wall_seconds = r.wall_seconds;
      pp.records = r.records;
      const auto steps = StepsOf(g, r.rank);
      if (!steps.empty()) {
        pp.first_step = steps.begin()->first;
        pp.last_step = steps.rbegin()->first;
      }
      pp.stderr_tail = TailLines(r.stderr_tail, 20, 4096);
      program_.processes.push_back(pp);
      Log(stage + " " + process + " rank " + std::to_string(r.rank) + ": " +
          (r.signal ? "signal " + std::to_string(r.signal) : "exit " + std::to_string(r.exit_code)) +
          ", " + std::to_string(r.records) + " records, " + FormatFixed(r.wall_seconds, 1) + " s" +
          (r.terminated ? " (ended by the supervisor)" : ""));
    }
    if (g.busy_window_seconds > 0) {
      PhaseBusy b;
      b.stage = stage;
      b.process = process;
      b.seconds = g.busy_window_seconds;
      b.cpu_cores = g.busy_cpu_seconds / g.busy_window_seconds;
      if (in_.device_utilization) {
        if (std::optional<double> u = in_.device_utilization(g.busy_from, g.busy_to)) b.device_utilization = *u;
      }
      program_.busy.push_back(b);
      Log(stage + " " + process + ": " + FormatFixed(b.cpu_cores, 2) + " CPU cores" +
          (b.device_utilization >= 0 ? ", GPUs " + FormatFixed(b.device_utilization * 100, 0) + "% busy" : "") +
          " over " + FormatFixed(b.seconds, 1) + " s of steps");
    }
    for (const std::string& o : g.outlived) {
      program_.outlived.push_back(stage + " " + process + ": " + o);
      Log(stage + " " + process + ": " + o + " outlived the phase: killed");
    }
    if (g.stopped) info_.stopped = true;
    return g;
  }

  PhaseExpect Expect(const std::string& process, int world) const {
    PhaseExpect e;
    e.process = process;
    e.first_step = process == "resumed" ? cfg_.checkpoint.at_step + 1 : 1;
    e.last_step = cfg_.training.steps;
    e.ranks = world;
    e.step_timeout = cfg_.program.step_timeout;
    e.loss_pattern = pattern_.has_value();
    return e;
  }

  void Problem(const std::string& what) {
    program_.problems.push_back(what);
    Log("problem: " + what);
  }

  // Lists and hashes the checkpoint folder as the job's user; the list goes
  // into the job's root-owned folder for the epilog. False when there is no
  // checkpoint to resume from (the reason is recorded).
  // `saved_by`: when the reference had saved step K (SavedBy): a listed
  // file changed later (its ctime, which its owner cannot set back) is a
  // later save, not the checkpoint the resumed process is to restore.
  bool HashCheckpoint(const std::string& dir, const std::string& stage, std::optional<double> saved_by,
                      std::string* why) {
    struct stat st{};
    const bool exists = ::lstat(dir.c_str(), &st) == 0;
    if (!exists || !S_ISDIR(st.st_mode)) {
      *why = "no checkpoint: " + dir + " (PILOT_CHECKPOINT_DIR) " +
             (exists ? "is not a directory" : "does not exist") +
             " after the reference process (PILOT_CHECKPOINT_STEP = " +
             std::to_string(cfg_.checkpoint.at_step) + ")";
      return false;
    }
    job::CommandSpec spec;
    spec.argv = {in_.opts->runner, "verify", "--program-checkpoint", dir, "--json"};
    const std::string user = in_.opts->run_as ? in_.opts->run_as->user : in_.lock->job.user;
    spec.env = job::CleanEnvironment(user, in_.opts->home);
    spec.run_as = in_.opts->run_as;
    spec.timeout_seconds = in_.opts->policy.verify_timeout_seconds;
    spec.max_output_bytes = 8u << 20;
    Result<job::CommandResult> r = job::RunCommand(spec);
    if (!r.ok()) {
      *why = "the checkpoint could not be listed: " + r.status().Message();
      return false;
    }
    Result<Json> parsed = ParseJsonText(r->out, "", spec.max_output_bytes);
    Json j = parsed.ok() ? std::move(parsed).value() : Json(Json::value_t::discarded);
    if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_array()) {
      *why = "the checkpoint could not be listed: pilot-runner verify " + r->Describe(spec.timeout_seconds) +
             (r->err.empty() ? "" : ": " + TailLines(r->err, 1, 300));
      return false;
    }
    const std::string list = in_.job.CheckpointFiles(stage);
    Status w = WriteFileAtomic(list, r->out, 0644);
    if (!w.ok()) Log("cannot keep the checkpoint's file list: " + w.ToString());
    int count = 0;
    int64_t bytes = 0;
    std::vector<std::pair<std::string, int64_t>> files, later;
    for (const auto& f : j["files"]) {
      ++count;
      if (!f.is_object() || !f.contains("size") || !f["size"].is_number_integer()) continue;
      const int64_t size = f["size"].get<int64_t>();
      bytes += size;
      const bool regular = f.contains("format") && f["format"].is_string() &&
                           f["format"] != "symlink" && f["format"] != "special";
      if (regular && f.contains("path") && f["path"].is_string()) {
        const std::string rel = f["path"].get<std::string>();
        (ChangedAfter(dir, rel, saved_by) ? later : files).emplace_back(dir + "/" + rel, size);
      }
    }
    CheckpointSaves cs;
    cs.saved_by_unix = saved_by.value_or(0);
    for (const auto& [path, size] : later) {
      ++cs.later_files;
      cs.later_bytes += size;
      if (cs.later_example.empty()) cs.later_example = path.substr(dir.size() + 1);
    }
    // Every file written after step K: the reference saved again into the
    // same files (or finished an asynchronous save late). Which is the
    // step-K state cannot be told: the read check counts them all.
    cs.rewritten = files.empty() && !later.empty();
    if (cs.rewritten) files.swap(later);
    for (const auto& [path, size] : files) {
      ++cs.at_step_files;
      cs.at_step_bytes += size;
    }
    if (cs.later_files > 0) {
      Log(stage + ": " + std::to_string(cs.later_files) + " checkpoint file(s) changed after the reference " +
          "passed step " + std::to_string(cfg_.checkpoint.at_step) + " (" + cs.later_example +
          (cs.rewritten ? "; all of them" : "") + ")");
    }
    if (stage == "single") {
      program_.checkpoint_dir = dir;
      program_.checkpoint_files = list;
      program_.checkpoint_file_count = count;
      program_.checkpoint_bytes = bytes;
      program_.checkpoint_saves = cs;
    }
    saves_ = cs;
    if (count == 0) {
      *why = "no checkpoint: " + dir + " (PILOT_CHECKPOINT_DIR) is empty after the reference process";
      return false;
    }
    checkpoint_bytes_ = bytes;
    if (stage == "single") checkpoint_listed_ = std::move(files);
    return true;
  }

  // Which of the listed checkpoint files the resumed process (or one of
  // its descendants) opened, as the supervisor's fanotify marks saw it.
  void NoteCheckpointRead(const GroupResult& res) {
    CheckpointRead& cr = program_.checkpoint_read;
    cr.watched = !checkpoint_listed_.empty() && res.watch_problem.empty();
    cr.problem = res.watch_problem;
    cr.files = static_cast<int>(checkpoint_listed_.size());
    for (size_t i = 0; i < checkpoint_listed_.size(); ++i) {
      cr.bytes += checkpoint_listed_[i].second;
      if (i < res.watch_opened.size() && res.watch_opened[i]) {
        ++cr.opened_files;
        cr.opened_bytes += checkpoint_listed_[i].second;
      }
    }
    Log("the resumed process opened " + std::to_string(cr.opened_files) + " of " +
        std::to_string(cr.files) + " checkpoint files (" + std::to_string(cr.opened_bytes) + " of " +
        std::to_string(cr.bytes) + " bytes)" + (cr.problem.empty() ? "" : "; " + cr.problem));
  }

  // What the reference's records say beyond its losses: the memory
  // series, the precision it trained in, what it ran with (the GPU's name
  // makes its measured throughput the basis of the plan and budget), and
  // the FLOPs its parameters imply.
  void NoteReference(const GroupResult& ref, SingleStage* s) {
    program_.memory_steps = MemorySteps(ref, 0);
    program_.precision = PrecisionOf(ref, 0);
    s->shape.precision = PrecisionWord(program_.precision);
    if (std::optional<ProgramEnvironment> env = EnvironmentOf(ref)) {
      program_.environment = *env;
      Versions& v = res_.versions;
      v.torch = env->torch;
      v.cuda_runtime = !env->cuda.empty() ? env->cuda : env->hip;
      v.nccl = env->nccl;
      v.cudnn = env->cudnn;
      if (!env->gpu.empty()) {
        v.devices.assign(static_cast<size_t>(std::max<int64_t>(1, env->gpu_count)), env->gpu);
        if (s->device == "cuda") s->device_name = env->gpu;
      }
    }
    if (s->shape.params > 0) {
      // 6 FLOPs per parameter and token (forward and backward); the
      // attention's share is not known for a program.
      s->flops_per_token = 6.0 * static_cast<double>(s->shape.params);
      s->tflops = s->tokens_per_second * s->flops_per_token / 1e12;
    }
  }

  // What is known of why a restore differs: the state fingerprints, and
  // the reference's later saves into the step-K files.
  std::string RestoreDiagnosis(const std::vector<StateComponentDiff>& state, const GroupResult& resumed) const {
    std::string out;
    if (const std::string d = StateDiagnosis(state); !d.empty()) out += "; " + d;
    // What the program itself printed about its resume (a framework's
    // warning that its data loader cannot resume mid-epoch).
    std::vector<std::string> hints;
    for (const RankResult& r : resumed.ranks) {
      for (std::string& h : StderrHints(r.stderr_tail)) {
        if (std::find(hints.begin(), hints.end(), h) == hints.end()) hints.push_back(std::move(h));
      }
    }
    for (const std::string& h : hints) out += "; " + h;
    if (device_ == "cuda" && !cfg_.training.deterministic) {
      out += "; hint: without training.deterministic the program's GPU kernels may compute a "
             "step differently in two runs, and the difference grows step by step: set it to "
             "tell a restore that differs from a run that does not repeat itself";
    }
    if (saves_.rewritten) {
      out += "; every checkpoint file changed after the reference passed step " +
             std::to_string(cfg_.checkpoint.at_step) +
             ": it saved again into the same files, so the resumed process may have restored a "
             "later step (save step K into a folder or file of its own)";
    }
    return out;
  }

  bool Bitwise() const { return device_ == "cpu" && cfg_.training.deterministic; }

  bool AcrossNodes() const { return hosts_.size() > 1; }

  int Single() {
    const std::string dir = CheckpointDir("single");
    struct stat st{};
    if (::lstat(dir.c_str(), &st) == 0) {
      Problem(dir + " exists before the reference process ran: a checkpoint found there proves nothing");
    }
    GroupResult ref = RunPhase("single", "reference", 1, 1, dir, "");
    SingleInputs si;
    si.reference = &ref;
    si.steps = cfg_.training.steps;
    si.warmup_steps = cfg_.training.warmup_steps;
    si.checkpoint_step = cfg_.checkpoint.at_step;
    si.device = device_;
    res_.single = SingleFromRecords(si);
    SingleStage& s = *res_.single;
    NoteReference(ref, &s);
    if (ref.stopped) {
      s.status = "error";
      return kExitError;
    }
    std::optional<PhaseProblem> bad = CheckPhase(ref, Expect("reference", 1));
    program_.shape_reported = false;
    for (const MetricRecord& r : ref.records) {
      if (r.seq_len && r.micro_batch) program_.shape_reported = true;
    }
    if (bad) {
      s.status = bad->kind == "oom" ? "oom" : "error";
      FailureInfo f;
      f.kind = bad->kind == "oom" ? "oom" : "error";
      f.step = bad->step;
      f.phase = "reference";
      f.message = bad->message;
      f.memory = s.memory;
      s.failure = f;
      s.restore.detail = "not run: the reference process failed";
      Problem(bad->message);
      return bad->kind == "oom" ? kExitOutOfMemory : kExitFailed;
    }
    std::string why;
    const bool have = HashCheckpoint(dir, "single", SavedBy(ref, cfg_.checkpoint.at_step), &why);
    s.checkpoint.path = dir;
    s.checkpoint.bytes = checkpoint_bytes_;
    if (!have) {
      s.restore.ran = false;
      s.restore.detail = why;
      Problem(why);
      return kExitFailed;
    }
    if (StopRequested()) return kExitError;
    std::vector<std::string> watch;
    for (const auto& [path, size] : checkpoint_listed_) watch.push_back(path);
    // The resumed process saves into a folder of its own: a program that
    // saves on its schedule (at K and 2K) then leaves the listed files as
    // the reference wrote them.
    GroupResult res = RunPhase("single", "resumed", 1, cfg_.checkpoint.at_step + 1,
                               CheckpointDir("single-resumed"), dir, watch);
    NoteCheckpointRead(res);
    s.memory_resumed = FirstStepMemory(res, s.device);
    info_.restore_compared = true;
    if (res.stopped) return kExitError;
    if (std::optional<PhaseProblem> rb = CheckPhase(res, Expect("resumed", 1))) {
      s.restore.ran = true;
      s.restore.equal = false;
      s.restore.mode = Bitwise() ? "bitwise" : "tolerance";
      s.restore.from_step = cfg_.checkpoint.at_step;
      s.restore.to_step = cfg_.training.steps;
      s.restore.detail = rb->message;
      Problem(rb->message);
      return rb->kind == "oom" ? kExitOutOfMemory : kExitFailed;
    }
    RestoreComparison c = CompareResumed(ref, res, cfg_.checkpoint.at_step, cfg_.training.steps, 1,
                                         Bitwise(), cfg_.eval.restore_tolerance);
    s.restore = c.info;
    program_.state = CompareState(ref, res, cfg_.checkpoint.at_step);
    if (!s.restore.equal) s.restore.detail += RestoreDiagnosis(program_.state, res);
    program_.lr_compared = c.lr_compared;
    program_.eval_compared = c.eval_compared;
    Log(std::string("restore ") + (s.restore.equal ? "equal" : "NOT equal") +
        (s.restore.detail.empty() ? "" : ": " + s.restore.detail));
    if (!s.restore.equal) {
      Problem(s.restore.detail);
      return kExitFailed;
    }
    return kExitOk;
  }

  int Node() {
    const std::string dir = CheckpointDir("node");
    NodeStage n;
    n.world_size = world_;
    n.mode = "program";
    n.launcher = cfg_.program.launcher == "none" ? "program"
                 : AcrossNodes()                 ? launch::kSrun
                                                 : launch::kLocal;
    n.data_ranks = world_;
    n.steps = cfg_.training.steps;
    n.status = "ok";
    if (AcrossNodes()) n.comm.nodes = static_cast<int>(hosts_.size());
    auto fail = [&](const std::string& phase, const PhaseProblem& p, int code) {
      n.status = "error";
      n.failure = NodeFailure{phase, p.rank ? std::optional<int64_t>(*p.rank) : std::nullopt, p.message};
      Problem(p.message);
      res_.node = n;
      return code;
    };
    if (AcrossNodes() && world_ % static_cast<int>(hosts_.size()) != 0) {
      return fail("train",
                  PhaseProblem{"error", 1, std::nullopt,
                               std::to_string(world_) + " ranks (parallel.nproc) do not divide evenly over the job's " +
                                   std::to_string(hosts_.size()) + " nodes; ask for a multiple of the node count"},
                  kExitFailed);
    }
    if (AcrossNodes()) {
      WorkOnNodesInput w{in_.opts->run_as, in_.base_env, hosts_, in_.out};
      if (std::optional<std::string> missing = WorkFolderMissing(w, Log)) {
        return fail("train", PhaseProblem{"error", 1, std::nullopt, *missing}, kExitFailed);
      }
    }
    GroupResult ref = RunPhase("node", "reference", world_, 1, dir, "");
    if (ref.stopped) return kExitError;
    if (auto bad = CheckPhase(ref, Expect("reference", world_))) {
      return fail("train", *bad, bad->kind == "oom" ? kExitOutOfMemory : kExitFailed);
    }
    double total_tps = 0;
    for (int rank = 0; rank < world_; ++rank) {
      const auto steps = StepsOf(ref, rank);
      const Throughput t = ThroughputOf(steps, cfg_.training.warmup_steps, cfg_.checkpoint.at_step);
      NodeRankStats rs;
      rs.rank = rank;
      if (AcrossNodes()) {
        // srun's block distribution: the first world/nodes ranks on the first node, and so on.
        rs.node_id = rank / (world_ / static_cast<int>(hosts_.size()));
        rs.host = hosts_[static_cast<size_t>(rs.node_id)];
      }
      rs.tokens_per_second = t.tokens_per_second;
      rs.step_ms = t.step_ms;
      rs.data_wait_ms = t.data_wait_ms;
      if (!steps.empty()) {
        rs.memory = NodeMemoryOf(steps.rbegin()->second);
        RaisePeak(&n.memory.fresh_peak_bytes, rs.memory->peak_allocated_bytes);
      }
      n.data_stall_ms_per_step = std::max(n.data_stall_ms_per_step, t.data_wait_ms);
      total_tps += t.tokens_per_second;
      n.ranks.push_back(rs);
    }
    for (const auto& [step, r] : StepsOf(ref, 0)) n.losses.push_back(r.loss);
    n.scaling.tokens_per_second = total_tps;
    n.scaling.tokens_per_second_per_rank = total_tps / world_;
    if (res_.single && res_.single->tokens_per_second > 0) {
      n.scaling.single_tokens_per_second = res_.single->tokens_per_second;
      n.scaling.efficiency = n.scaling.tokens_per_second_per_rank / res_.single->tokens_per_second;
    }
    n.checkpoint.path = dir;
    n.checkpoint.step = cfg_.checkpoint.at_step;
    n.checkpoint.shards = world_;
    std::string why;
    NodeRestore nr;
    nr.world_size = world_;
    nr.from_world_size = world_;
    nr.tolerance = Bitwise() ? 0 : cfg_.eval.restore_tolerance;
    // The restore at the node's size failed for `detail`.
    auto restore_failed = [&](const std::string& detail, int code) {
      nr.detail = detail;
      n.restore.push_back(nr);
      n.status = "failed";
      Problem(detail);
      res_.node = n;
      return code;
    };
    if (!HashCheckpoint(dir, "node", SavedBy(ref, cfg_.checkpoint.at_step), &why)) {
      return restore_failed(why, kExitFailed);
    }
    n.checkpoint.bytes = checkpoint_bytes_;
    if (StopRequested()) return kExitError;
    GroupResult res = RunPhase("node", "resumed", world_, cfg_.checkpoint.at_step + 1,
                               CheckpointDir("node-resumed"), dir);
    if (res.stopped) return kExitError;
    nr.ran = true;
    if (auto bad = CheckPhase(res, Expect("resumed", world_))) {
      return restore_failed(bad->message, bad->kind == "oom" ? kExitOutOfMemory : kExitFailed);
    }
    RestoreComparison c = CompareResumed(ref, res, cfg_.checkpoint.at_step, cfg_.training.steps,
                                         world_, Bitwise(), cfg_.eval.restore_tolerance);
    nr.equal = c.info.equal;
    nr.max_abs_loss_diff = c.info.max_abs_loss_diff;
    nr.max_rel_loss_diff = c.info.max_rel_loss_diff;
    nr.detail = c.info.detail;
    if (!nr.equal) nr.detail += RestoreDiagnosis(CompareState(ref, res, cfg_.checkpoint.at_step), res);
    n.restore.push_back(nr);
    for (int rank = 0; rank < world_; ++rank) {
      const auto steps = StepsOf(res, rank);
      if (steps.empty() || rank >= static_cast<int>(n.ranks.size())) continue;
      const NodeMemoryStats m = NodeMemoryOf(steps.begin()->second);
      n.ranks[static_cast<size_t>(rank)].memory_resumed = m;
      RaisePeak(&n.memory.resumed_peak_bytes, m.peak_allocated_bytes);
    }
    if (!nr.equal) {
      n.status = "failed";
      Problem(nr.detail);
    }
    res_.node = n;
    return nr.equal ? kExitOk : kExitFailed;
  }

  const ProgramPilotInput& in_;
  const Config& cfg_;
  Results& res_;
  SupervisorInfo& info_;
  ProgramInfo program_;
  std::optional<LossPattern> pattern_;
  std::optional<ContainerSetup> container_;  // [container] runtime other than "none"
  std::string device_;
  int world_ = 1;
  std::vector<std::string> hosts_;  // the job's nodes, when it has several
  std::string metrics_dir_;
  int64_t checkpoint_bytes_ = 0;
  CheckpointSaves saves_;  // the last HashCheckpoint's
  std::vector<std::pair<std::string, int64_t>> checkpoint_listed_;  // path, bytes
};

}  // namespace

std::vector<std::string> ProgramEnv(const ProgramEnvInput& in) {
  std::vector<std::string> env = in.base_env;
  std::vector<std::string> seen;
  for (const std::string& kv : in.job_env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = kv.substr(0, eq);
    if (PilotOwned(name) || std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);  // the first of a name twice wins, as getenv(3) reads it
    SetEnvValue(&env, name, kv.substr(eq + 1));
  }
  std::string py = EnvValue(in.job_env, "PYTHONPATH");
  if (in.cfg != nullptr) {
    for (const auto& [k, v] : in.cfg->program.env) SetEnvValue(&env, k, v);
    // program.env's PYTHONPATH takes the job's place, after the probe.
    if (auto it = in.cfg->program.env.find("PYTHONPATH"); it != in.cfg->program.env.end()) py = it->second;
  }
  SetEnvValue(&env, "PYTHONPATH", in.probe_path + (py.empty() ? "" : ":" + py));
  if (in.cfg != nullptr) {
    if (!in.cfg->training.alloc_conf.empty() && in.device == "cuda") {
      SetEnvValue(&env, "PYTORCH_CUDA_ALLOC_CONF", in.cfg->training.alloc_conf);
      SetEnvValue(&env, "PYTORCH_ALLOC_CONF", in.cfg->training.alloc_conf);
    }
    SetEnvValue(&env, "PILOT_STEPS", std::to_string(in.cfg->training.steps));
    SetEnvValue(&env, "PILOT_CHECKPOINT_STEP", std::to_string(in.cfg->checkpoint.at_step));
    SetEnvValue(&env, "PILOT_SEQ_LEN", std::to_string(in.cfg->run.seq_len));
    SetEnvValue(&env, "PILOT_MICRO_BATCH", std::to_string(in.cfg->run.micro_batch));
    if (in.cfg->training.deterministic) {
      // The probe asks torch for deterministic kernels; cuBLAS needs its
      // workspace fixed before CUDA starts (unless the job fixed one).
      SetEnvValue(&env, "PILOT_DETERMINISTIC", "1");
      if (in.device == "cuda" && EnvValue(env, "CUBLAS_WORKSPACE_CONFIG").empty()) {
        SetEnvValue(&env, "CUBLAS_WORKSPACE_CONFIG", ":4096:8");
      }
    }
  }
  SetEnvValue(&env, "PILOT_CHECKPOINT_DIR", in.checkpoint_dir);
  if (!in.resume_dir.empty()) SetEnvValue(&env, "PILOT_RESUME_DIR", in.resume_dir);
  if (!in.metrics.empty()) SetEnvValue(&env, "PILOT_METRICS", in.metrics);
  SetEnvValue(&env, "PILOT_STAGE", in.stage);
  SetEnvValue(&env, "PILOT_PROCESS", in.process);
  SetEnvValue(&env, "PILOT_DEVICE", in.device);
  SetEnvValue(&env, "PILOT_SEED", std::to_string(in.seed));
  launch::RankPlace place;
  place.rank = in.rank;
  place.local_rank = in.local_rank;
  place.world_size = in.world_size;
  place.local_world_size = in.local_world_size;
  place.master_addr = in.master_addr;
  place.master_port = in.master_port;
  launch::SetRankEnv(&env, place, launch::RankVars::kTorchrun);
  if (in.tasks > 0) {
    // What srun would give the tasks the supervisor starts in its place
    // (frameworks that detect Slurm read their rank from these).
    SetEnvValue(&env, "SLURM_PROCID", std::to_string(in.rank));
    SetEnvValue(&env, "SLURM_LOCALID", std::to_string(in.local_rank));
    SetEnvValue(&env, "SLURM_NTASKS", std::to_string(in.tasks));
    SetEnvValue(&env, "SLURM_NPROCS", std::to_string(in.tasks));
  }
  return env;
}

int RunProgramPilot(const ProgramPilotInput& in, Results* res, SupervisorInfo* info) {
  return ProgramPilot(in, res, info).Run();
}

}  // namespace pilot::supervisor
