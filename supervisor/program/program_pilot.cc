#include "supervisor/program/program_pilot.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "core/base/strings.h"
#include "core/records/exit_codes.h"
#include "core/records/python_error.h"
#include "launch/launcher.h"
#include "supervisor/cgroup.h"
#include "supervisor/process.h"
#include "supervisor/program/checkpoint_evidence.h"
#include "supervisor/program/container.h"
#include "supervisor/program/group.h"
#include "supervisor/program/judge.h"
#include "supervisor/program/observe.h"
#include "supervisor/program/phase_layout.h"
#include "supervisor/program/phase_outcome.h"
#include "supervisor/program/restore_judge.h"
#include "supervisor/work_on_nodes.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

void LogProgramPilot(const std::string& line) { std::fprintf(stderr, "pilot: supervisor: %s\n", line.c_str()); }

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
    place_ = PlaceProgram(cfg_, *in_.lock, in_.opts->job_env);
    device_ = place_.device;
    program_.memory_limit_bytes = MemoryLimitBytes();
    metrics_dir_ = in_.job.metrics;
    ::mkdir(metrics_dir_.c_str(), 0711);
    ::chmod(metrics_dir_.c_str(), 0711);
    int rc = kExitOk;
    const std::string& stage = in_.opts->stage;
    if (cfg_.container.runtime != "none" && !PrepareContainer(place_.gpus)) {
      res_.program = program_;
      return kExitFailed;
    }
    if (stage != "node") rc = Single();
    if (!StopRequested() && World() > 1 && (stage == "node" || (stage == "all" && rc == kExitOk))) {
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
    Result<ContainerSetup> c = MakeContainerSetup(
        cfg_, *in_.lock, in_.opts->policy, in_.opts->run_as, program_.workdir, gpus,
        {in_.out, metrics_dir_, ResolveProbePath(in_.opts->policy), program_.workdir}, metrics_dir_);
    if (!c.ok()) {
      const std::string why = c.status().detail();
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
    LogProgramPilot("container: " + container_->runtime + " " + container_->image);
    return true;
  }

  std::string CheckpointDir(const std::string& stage) const {
    return in_.out + "/pilot-checkpoints/" + stage;
  }

  // The socket a phase's processes write their records to: root's folder
  // (0711), the user's socket (0600), made and removed by RunGroup.
  std::string SocketPath(const std::string& stage, const std::string& process) const {
    return metrics_dir_ + "/" + stage + "-" + process + ".sock";
  }

  // `label` names the phase in results.json and the log where it is not
  // `process`, the PILOT_PROCESS the program sees ("repeat": a second
  // resumed process).
  GroupResult RunPhase(const std::string& stage, const std::string& process, int64_t first_step,
                       const std::string& checkpoint_dir, const std::string& resume_dir,
                       const std::vector<std::string>& watch_files = {},
                       const std::string& label = "") {
    const std::string& name = label.empty() ? process : label;
    const launch::NodeLayout& layout = stage == "node" ? place_.node : place_.single;
    GroupSpec spec;
    spec.run_as = in_.opts->run_as;
    spec.cwd = program_.workdir;
    spec.step_timeout_seconds = cfg_.program.step_timeout;
    // After the last step, as long as a step may take (a final save).
    spec.last_step_grace_seconds = cfg_.program.step_timeout;
    spec.loss_pattern = pattern_;
    spec.first_step = first_step;
    spec.last_step = cfg_.training.steps;
    spec.expected_ranks = layout.world;
    spec.max_records = std::min<int64_t>(
        2000000, 4 * int64_t{cfg_.training.steps} * std::max(1, layout.world) + 1000);
    spec.tick = in_.tick;
    spec.process_per_rank = layout.kind == launch::kLocal;
    spec.local_work = layout.kind != launch::kSrun;
    if (!layout.AcrossNodes()) spec.metrics_socket = SocketPath(stage, name);
    spec.watch_files = watch_files;
    // The reference's save: the CPU time at its records of K and K+1.
    if (process == "reference") spec.cpu_mark_steps = {cfg_.checkpoint.at_step, cfg_.checkpoint.at_step + 1};
    PhaseLaunchInput pl;
    pl.cfg = &cfg_;
    pl.lock = in_.lock;
    pl.base_env = in_.base_env;
    pl.job_env = in_.opts->job_env;
    pl.probe_path = ResolveProbePath(in_.opts->policy);
    pl.layout = &layout;
    pl.container = container_ ? &*container_ : nullptr;
    pl.device = device_;
    pl.stage = stage;
    pl.process = process;
    pl.metrics_socket = spec.metrics_socket;
    pl.loss_pattern = pattern_.has_value();
    pl.checkpoint_dir = checkpoint_dir;
    pl.resume_dir = resume_dir;
    PhaseLaunch launch = PhaseRanks(pl);
    for (const std::string& p : launch.problems) Problem(p);
    spec.ranks = std::move(launch.ranks);
    LogProgramPilot(stage + " " + name + ": starting " + launch.description + " in " + spec.cwd);
    GroupResult g = RunGroup(spec);
    NotePhase(g, stage, name, in_.device_utilization, &program_);
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
    LogProgramPilot("problem: " + what);
  }

  // Lists and hashes the checkpoint folder as the job's user; the list goes
  // into the job's root-owned folder for the epilog. False when there is no
  // checkpoint to resume from (the reason is recorded).
  // `saved_by`: when the reference had saved step K (SavedBy).
  bool HashCheckpoint(const std::string& dir, const std::string& stage, std::optional<double> saved_by,
                      std::string* why) {
    ListCheckpointInput li;
    li.dir = dir;
    li.at_step = cfg_.checkpoint.at_step;
    li.saved_by = saved_by;
    li.runner = in_.opts->runner;
    li.run_as = in_.opts->run_as;
    li.user = in_.opts->run_as ? in_.opts->run_as->user : in_.lock->job.user;
    li.home = in_.opts->home;
    li.timeout_seconds = in_.opts->policy.verify_timeout_seconds;
    li.list_file = in_.job.CheckpointFiles(stage);
    Result<CheckpointListing> listed = ListCheckpoint(li);
    if (!listed.ok()) {
      *why = listed.status().detail();
      return false;
    }
    const CheckpointSaves& cs = listed->saves;
    if (cs.later_files > 0) {
      LogProgramPilot(stage + ": " + std::to_string(cs.later_files) + " checkpoint file(s) changed after the reference " +
          "passed step " + std::to_string(cfg_.checkpoint.at_step) + " (" + cs.later_example +
          (cs.rewritten ? "; all of them" : "") + ")");
    }
    if (stage == "single") {
      program_.checkpoint_dir = dir;
      program_.checkpoint_files = li.list_file;
      program_.checkpoint_file_count = listed->files;
      program_.checkpoint_bytes = listed->bytes;
      program_.checkpoint_saves = cs;
    }
    saves_ = cs;
    if (listed->files == 0) {
      *why = EmptyCheckpoint(dir);
      return false;
    }
    checkpoint_bytes_ = listed->bytes;
    if (stage == "single") checkpoint_listed_ = std::move(listed->at_step);
    return true;
  }

  // What the resumed process's tree opened and read of the listed checkpoint files.
  void NoteCheckpointRead(const GroupResult& res) {
    const CheckpointRead& cr = program_.checkpoint_read = CheckpointReadOf(checkpoint_listed_, res);
    LogProgramPilot("the resumed process opened " + std::to_string(cr.opened_files) + " of " + std::to_string(cr.files) +
        " checkpoint files (" + std::to_string(cr.bytes) + " bytes) and read " + (cr.read_measured ?
        std::to_string(cr.read_bytes) + " bytes of them before its first record" : "? (" + cr.read_problem + ")") +
        (cr.problem.empty() ? "" : "; " + cr.problem));
  }

  // What RestoreDiagnosis may add beyond the state's fingerprints.
  RestoreHints Hints() const { return RestoreHints{saves_.rewritten, cfg_.checkpoint.at_step}; }

  bool Bitwise() const { return device_ == "cpu" && cfg_.training.deterministic; }

  // The resumed process's steps against the reference's, with a second
  // resumed process when a step is past the tolerance (restore_judge.h);
  // nullopt when the pilot was stopped meanwhile.
  std::optional<RestoreComparison> Compare(const std::string& stage, const GroupResult& ref,
                                           const GroupResult& res, const std::string& dir, int world) {
    const int64_t k = cfg_.checkpoint.at_step;
    auto repeat = [&]() -> std::optional<GroupResult> {
      GroupResult g = RunPhase(stage, "resumed", k + 1, CheckpointDir(stage + "-repeat"), dir, {}, "repeat");
      return g.stopped ? std::nullopt : std::optional<GroupResult>(std::move(g));
    };
    return CompareWithNoise(ref, res, k, cfg_.training.steps, world,
                            RestoreRuleFor(cfg_, in_.opts->policy.thresholds, Bitwise()),
                            Expect("resumed", world), repeat);
  }

  int World() const { return place_.node.world; }
  bool AcrossNodes() const { return place_.node.AcrossNodes(); }
  const std::vector<std::string>& Hosts() const { return place_.node.hosts; }

  int Single() {
    const std::string dir = CheckpointDir("single");
    struct stat st{};
    if (::lstat(dir.c_str(), &st) == 0) {
      Problem(dir + " exists before the reference process ran: a checkpoint found there proves nothing");
    }
    GroupResult ref = RunPhase("single", "reference", 1, dir, "");
    SingleInputs si;
    si.reference = &ref;
    si.steps = cfg_.training.steps;
    si.warmup_steps = cfg_.training.warmup_steps;
    si.checkpoint_step = cfg_.checkpoint.at_step;
    si.device = device_;
    res_.single = SingleFromRecords(si);
    SingleStage& s = *res_.single;
    NoteReference(ref, &program_, &res_.versions, &s);
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
    GroupResult res = RunPhase("single", "resumed", cfg_.checkpoint.at_step + 1,
                               CheckpointDir("single-resumed"), dir, watch);
    NoteCheckpointRead(res);
    s.memory_resumed = FirstStepMemory(res, s.device);
    info_.restore_compared = true;
    if (res.stopped) return kExitError;
    if (std::optional<PhaseProblem> rb = CheckPhase(res, Expect("resumed", 1))) {
      s.restore = UnequalRestore(Bitwise(), cfg_.checkpoint.at_step, cfg_.training.steps, rb->message);
      Problem(rb->message);
      return rb->kind == "oom" ? kExitOutOfMemory : kExitFailed;
    }
    std::optional<RestoreComparison> c = Compare("single", ref, res, dir, 1);
    if (!c) return kExitError;
    s.restore = c->info;
    program_.state = JudgeState(ref, res, *c, Hints(), &s.restore.equal, &s.restore.detail);
    program_.lr_compared = c->lr_compared;
    program_.eval_compared = c->eval_compared;
    LogProgramPilot(std::string("restore ") + (s.restore.equal ? "equal" : "NOT equal") +
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
    n.world_size = World();
    n.mode = "program";
    n.launcher = place_.node.kind;
    n.data_ranks = World();
    n.steps = cfg_.training.steps;
    n.status = "ok";
    if (AcrossNodes()) n.comm.nodes = static_cast<int>(Hosts().size());
    auto fail = [&](const std::string& phase, const PhaseProblem& p, int code) {
      n.status = "error";
      n.failure = NodeFailure{phase, p.rank ? std::optional<int64_t>(*p.rank) : std::nullopt, p.message};
      Problem(p.message);
      res_.node = n;
      return code;
    };
    if (place_.node.Uneven()) {
      return fail("train",
                  PhaseProblem{"error", 1, std::nullopt,
                               std::to_string(World()) + " ranks (parallel.nproc) do not divide evenly over the job's " +
                                   std::to_string(Hosts().size()) + " nodes; ask for a multiple of the node count"},
                  kExitFailed);
    }
    if (AcrossNodes()) {
      WorkOnNodesInput w{in_.opts->run_as, in_.base_env, Hosts(), in_.out};
      if (std::optional<std::string> missing = WorkFolderMissing(w, LogProgramPilot)) {
        return fail("train", PhaseProblem{"error", 1, std::nullopt, *missing}, kExitFailed);
      }
    }
    GroupResult ref = RunPhase("node", "reference", 1, dir, "");
    if (ref.stopped) return kExitError;
    if (auto bad = CheckPhase(ref, Expect("reference", World()))) {
      return fail("train", *bad, bad->kind == "oom" ? kExitOutOfMemory : kExitFailed);
    }
    NoteNodeReference(ref, place_.node, cfg_.training.warmup_steps, cfg_.checkpoint.at_step,
                      res_.single ? res_.single->tokens_per_second : 0, &n);
    n.checkpoint.path = dir;
    n.checkpoint.step = cfg_.checkpoint.at_step;
    n.checkpoint.shards = World();
    std::string why;
    NodeRestore nr;
    nr.world_size = World();
    nr.from_world_size = World();
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
    GroupResult res = RunPhase("node", "resumed", cfg_.checkpoint.at_step + 1,
                               CheckpointDir("node-resumed"), dir);
    if (res.stopped) return kExitError;
    nr.ran = true;
    if (auto bad = CheckPhase(res, Expect("resumed", World()))) {
      return restore_failed(bad->message, bad->kind == "oom" ? kExitOutOfMemory : kExitFailed);
    }
    std::optional<RestoreComparison> c = Compare("node", ref, res, dir, World());
    if (!c) return kExitError;
    NoteNodeComparison(*c, &nr);
    JudgeState(ref, res, *c, Hints(), &nr.equal, &nr.detail);
    n.restore.push_back(nr);
    NoteNodeResumed(res, &n);
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
  ProgramPlacement place_;  // where the ranks run
  std::string metrics_dir_;
  int64_t checkpoint_bytes_ = 0;
  CheckpointSaves saves_;  // the last HashCheckpoint's
  std::vector<std::pair<std::string, int64_t>> checkpoint_listed_;  // path, bytes
};

}  // namespace

int RunProgramPilot(const ProgramPilotInput& in, Results* res, SupervisorInfo* info) {
  return ProgramPilot(in, res, info).Run();
}

}  // namespace pilot::supervisor
