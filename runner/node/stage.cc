// The node stage's launching process: starts the ranks of each phase
// through a Launcher (launch/launcher.h), watches them, and folds
// their reports into the summary.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "core/base/atomic_file.h"
#include "launch/launcher.h"
#include "launch/layout.h"
#include "launch/rank_env.h"
#include "runner/ckpt/compare.h"
#include "runner/node/stage.h"

extern char** environ;

namespace pilot::runner {
namespace fs = std::filesystem;
using launch::Launcher;
using launch::LaunchRequest;
using launch::RankBlame;
namespace {

// A variable of the job's environment as a positive integer; 0 otherwise.
int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::max(0, std::atoi(v)) : 0;
}

using Clock = std::chrono::steady_clock;

struct Phase {
  std::string name;      // "train", "resume", "resume-other"
  int world = 1;
  std::string dir;       // reports
  std::string checkpoint, reference;
};

struct PhaseOutcome {
  bool ok = true;
  int exit_code = kExitOk;
  std::string message;   // names the failed rank
  std::optional<int> failed_rank;
  std::vector<std::optional<RankReport>> reports;  // by rank; nullopt when missing or unreadable
};

std::vector<std::string> ChildArgs(const RunOptions& o, const Phase& ph) {
  std::vector<std::string> a = {"run", "--config", o.config, "--out", o.out, "--stage", "node"};
  if (!o.lock.empty()) a.insert(a.end(), {"--lock", o.lock});
  for (const auto& s : o.sets) a.insert(a.end(), {"--set", s});
  if (!ph.checkpoint.empty()) a.insert(a.end(), {"--resume-from", ph.checkpoint, "--reference", ph.reference});
  return a;
}

// The ranks' environment: the launcher's own, less the rank variables it
// sets itself. Everything else (NCCL_*, TORCH_*, CUDA_VISIBLE_DEVICES, ...)
// reaches every rank unchanged, locally and through srun (--export=ALL).
std::vector<std::string> BaseEnv() {
  static const char* const kDrop[] = {"PILOT_RANK=", "PILOT_WORLD_SIZE=", "PILOT_LOCAL_RANK=",
                                      "PILOT_MASTER_ADDR=", "PILOT_MASTER_PORT=", "PILOT_NODE_ID=",
                                      "PILOT_DATA_RANKS=", "PILOT_NODE_DIR="};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    bool drop = false;
    for (const char* d : kDrop) drop = drop || std::strncmp(*e, d, std::strlen(d)) == 0;
    if (!drop) env.emplace_back(*e);
  }
  return env;
}

// Waits for every child; after the first failure gives the others
// kNodeGraceSeconds to stop on their own, then SIGTERM, then SIGKILL.
// Returns (pid index, status) of every failure, in the order seen.
std::vector<std::pair<size_t, int>> Watch(std::vector<pid_t>& pids, bool* signalled) {
  std::vector<std::pair<size_t, int>> failures;
  std::optional<Clock::time_point> since;
  bool termed = false, killed = false;
  size_t alive = 0;
  for (pid_t p : pids) alive += p > 0;
  while (alive > 0) {
    int status = 0;
    const pid_t got = ::waitpid(-1, &status, WNOHANG);
    if (got > 0) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != got) continue;
        pids[i] = -1;
        --alive;
        const bool bad = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (bad) {
          failures.emplace_back(i, status);
          if (!since) since = Clock::now();
        }
      }
      continue;
    }
    if (got < 0 && errno == ECHILD) break;
    if (since) {
      const double s = std::chrono::duration<double>(Clock::now() - *since).count();
      const int sig = s > kNodeGraceSeconds + 5 ? SIGKILL : s > kNodeGraceSeconds ? SIGTERM : 0;
      if ((sig == SIGTERM && !termed) || (sig == SIGKILL && !killed)) {
        for (pid_t p : pids) {
          if (p > 0) ::kill(p, sig);
        }
        termed = true;
        killed = killed || sig == SIGKILL;
        *signalled = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return failures;
}

PhaseOutcome RunPhase(const RunOptions& o, const Config& cfg, const Phase& ph, int data_ranks, Launcher& launcher) {
  PhaseOutcome out;
  std::error_code ec;
  fs::remove_all(ph.dir, ec);
  fs::create_directories(ph.dir, ec);
  LaunchRequest req;
  req.world = ph.world;
  req.args = ChildArgs(o, ph);
  req.env = BaseEnv();
  req.env.push_back("PILOT_DATA_RANKS=" + std::to_string(data_ranks));
  req.env.push_back("PILOT_NODE_DIR=" + ph.dir);
  std::fprintf(stderr, "pilot: node: %s: %d process%s (%s, %s)\n", ph.name.c_str(), ph.world,
               ph.world == 1 ? "" : "es", launcher.Name().c_str(), cfg.parallel.mode.c_str());
  const std::vector<pid_t> pids = launcher.Start(req);
  std::vector<pid_t> watch = pids;
  for (pid_t p : pids) {
    if (p <= 0) {
      for (pid_t q : pids) {
        if (q > 0) ::kill(q, SIGKILL);
      }
    }
  }
  bool signalled = false;
  const std::vector<std::pair<size_t, int>> failures = Watch(watch, &signalled);
  for (int r = 0; r < ph.world; ++r) {
    char b[32];
    std::snprintf(b, sizeof(b), "/rank-%05d.json", r);
    Result<RankReport> rep = ReadRankReport(ph.dir + b);
    if (!rep.ok() && rep.status().code() != Code::kNotFound) {
      std::fprintf(stderr, "pilot: node: %s: %s\n", ph.name.c_str(), rep.status().ToString().c_str());
    }
    out.reports.push_back(rep.ok() ? std::optional<RankReport>(std::move(rep).value()) : std::nullopt);
  }
  if (failures.empty()) {
    for (int r = 0; r < ph.world; ++r) {
      if (!out.reports[r]) {
        out.ok = false;
        out.failed_rank = r;
        out.exit_code = kExitError;
        out.message = "rank " + std::to_string(r) + " left no report";
        break;
      }
    }
    return out;
  }
  out.ok = false;
  // Ranks reaped in one poll may come in any order: the one that died
  // (no report) or failed for its own reason comes before those whose
  // collectives failed because of it.
  std::optional<std::pair<size_t, int>> failed;
  for (const auto& f : failures) {
    const std::optional<RankReport>* rep = f.first < out.reports.size() ? &out.reports[f.first] : nullptr;
    if (rep == nullptr || !PeerFailed(*rep)) {
      failed = f;
      break;
    }
  }
  if (!failed) failed = failures.front();
  const int status = failed->second;
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitError;
  if (out.exit_code == kExitOk) out.exit_code = kExitError;
  const RankBlame blame = launcher.Blame(failed->first, status, signalled, out.reports);
  out.failed_rank = blame.rank;
  out.message = blame.message;
  std::fprintf(stderr, "pilot: node: %s: %s; the other ranks were stopped\n", ph.name.c_str(), out.message.c_str());
  return out;
}

// The mean of a figure over the ranks that report it.
double Mean(const std::vector<std::optional<RankReport>>& reps,
            std::optional<double> RankReport::*figure) {
  double s = 0;
  int n = 0;
  for (const auto& r : reps) {
    if (r && (*r).*figure) {
      s += *((*r).*figure);
      ++n;
    }
  }
  return n ? s / n : 0;
}

std::optional<NodeMemoryStats> MemoryOf(const std::optional<RankReport>& rep) {
  if (!rep || !rep->memory) return std::nullopt;
  return NodeMemoryStats(*rep->memory);
}

std::optional<int64_t> PeakOf(const std::optional<NodeMemoryStats>& m) {
  if (!m) return std::nullopt;
  if (m->peak_allocated_bytes) return m->peak_allocated_bytes;
  return m->process_peak_rss_bytes;
}

NodeRestore CompareRestore(const PhaseOutcome& ref, const PhaseOutcome& got, const Phase& ph, int from_world,
                           double tol) {
  NodeRestore r;
  r.world_size = ph.world;
  r.from_world_size = from_world;
  r.ran = got.ok;
  r.tolerance = tol;
  if (!got.ok) {
    r.detail = got.message;
    return r;
  }
  const RankReport& a = *ref.reports[0];
  const RankReport& b = *got.reports[0];
  const std::vector<double> la = a.losses.value_or(std::vector<double>{});
  const std::vector<double> lb = b.losses.value_or(std::vector<double>{});
  const size_t first = static_cast<size_t>(std::max<int64_t>(1, b.first_step.value_or(1)));
  const bool complete = !lb.empty() && la.size() == first - 1 + lb.size();
  if (complete) {
    const std::vector<double> resumed = lb;
    const std::vector<double> reference(la.begin() + static_cast<std::ptrdiff_t>(first - 1), la.end());
    const LossDiff d = CompareLosses(resumed, reference);
    r.max_abs_loss_diff = std::max(r.max_abs_loss_diff, d.max_abs);
    r.max_rel_loss_diff = std::max(r.max_rel_loss_diff, d.max_rel);
  }
  r.max_abs_param_diff = b.max_abs_param_diff.value_or(INFINITY);
  r.max_rel_param_diff = b.max_rel_param_diff.value_or(INFINITY);
  if (b.load) r.load_seconds = b.load->seconds;
  r.skipped = b.skipped.value_or("");
  r.equal = complete && r.max_rel_loss_diff <= tol && r.max_rel_param_diff <= tol;
  if (!r.equal) {
    r.detail = !complete ? "the resumed run has the wrong number of steps"
               : r.max_rel_loss_diff > tol ? "losses of the resumed steps differ"
                                           : "final parameters differ";
  }
  return r;
}

// The ranks' probes of the two levels of a world across nodes: each level's
// slowest rank, its largest group and how many groups ran it.
void SummarizeLevels(const std::vector<std::optional<RankReport>>& reports, NodeComm* comm) {
  std::set<int> nodes;
  for (const auto& r : reports) {
    if (r) nodes.insert(r->node_id);
  }
  comm->nodes = static_cast<int>(nodes.size());
  auto level = [&](std::optional<int> RankCommProbe::*size, std::optional<double> RankCommProbe::*ms,
                   bool by_node) -> std::optional<NodeCommLevel> {
    NodeCommLevel l;
    std::set<int> groups;
    for (const auto& r : reports) {
      if (!r || !r->comm_probe || !((*r->comm_probe).*size) || !((*r->comm_probe).*ms)) continue;
      const RankCommProbe& p = *r->comm_probe;
      l.group_size = std::max(l.group_size, *(p.*size));
      l.bytes = p.bytes;
      l.allreduce_ms = std::max(l.allreduce_ms, *(p.*ms));
      groups.insert(by_node ? r->node_id : r->local_rank);
    }
    if (groups.empty()) return std::nullopt;
    l.groups = static_cast<int>(groups.size());
    l.gb_per_second = l.allreduce_ms > 0 ? static_cast<double>(l.bytes) / (l.allreduce_ms * 1e6) : 0.0;
    return l;
  };
  comm->intra_node = level(&RankCommProbe::intra_size, &RankCommProbe::intra_ms, true);
  comm->inter_node = level(&RankCommProbe::inter_size, &RankCommProbe::inter_ms, false);
}

}  // namespace

bool IsNodeRank() {
  if (std::getenv("PILOT_RANK")) return true;
  if (!launch::InSlurmStep(ProcessEnv())) return false;
  // One task of a step is the launcher unless the launcher started it.
  const char* tasks = std::getenv("SLURM_NTASKS");
  return std::getenv("PILOT_NODE_DIR") != nullptr || (tasks && std::atoi(tasks) > 1);
}

int RunNodeStage(const RunOptions& o, const Config& cfg, int nproc, std::optional<double> single_tps,
                 NodeStage* node) {
  const int64_t gpus = at::detail::getCUDAHooks().getNumGPUs();
  const bool cuda = cfg.training.device != "cpu" && gpus > 0;
  launch::LayoutRequest lr;
  lr.launcher = cfg.parallel.launcher;
  lr.nproc = cfg.parallel.nproc;
  lr.world_override = nproc;
  lr.cuda = cuda;
  lr.visible_gpus = static_cast<int>(gpus);
  lr.tasks_per_node = EnvInt("SLURM_NTASKS_PER_NODE");
  lr.in_slurm_job = std::getenv("SLURM_JOB_ID") != nullptr;
  lr.job_nodes = EnvInt("SLURM_JOB_NUM_NODES");
  const launch::NodeLayout layout = launch::DecideNodeLayout(lr);
  const std::unique_ptr<Launcher> launcher = launch::MakeLauncher(layout.kind);
  const int nodes = layout.nodes;
  const int data_ranks = layout.data_ranks;
  const int world = layout.world;
  NodeStage& n = *node;
  n = NodeStage{};
  n.status = "error";
  n.world_size = world;
  n.mode = cfg.parallel.mode;
  n.data_ranks = data_ranks;
  n.steps = cfg.training.steps;
  n.scaling.single_tokens_per_second = single_tps;
  if (data_ranks % world != 0) {
    const std::string m = std::to_string(world) + " processes do not divide parallel.nproc = " +
                          std::to_string(data_ranks);
    n.failure = NodeFailure{"train", std::nullopt, m};
    std::fprintf(stderr, "pilot: node: --nproc: %s\n"
                         "HINT: the global batch is parallel.nproc data ranks' micro-batches; use a divisor\n",
                 m.c_str());
    return kExitUsage;
  }
  n.launcher = launcher->Name();
  const std::string base = o.out + "/node";
  auto fail = [&](const PhaseOutcome& p, const std::string& phase) {
    n.status = "error";
    n.failure = NodeFailure{phase, p.failed_rank ? std::optional<int64_t>(*p.failed_rank) : std::nullopt, p.message};
    return p.exit_code == kExitOutOfMemory ? kExitOutOfMemory : p.exit_code == kExitUsage ? kExitUsage : kExitError;
  };
  Phase train{"train", world, base + "/train", "", ""};
  PhaseOutcome t = RunPhase(o, cfg, train, data_ranks, *launcher);
  if (!t.ok) return fail(t, "train");
  // A phase that ended ok has every rank's report (RunPhase).
  const RankReport& r0 = *t.reports[0];
  n.losses = r0.losses.value_or(std::vector<double>{});
  double tps_sum = 0;
  std::optional<int64_t> peak_fresh;
  for (const auto& rep : t.reports) {
    const RankReport& r = *rep;
    NodeRankStats st;
    st.rank = r.rank;
    st.node_id = r.node_id;
    st.host = r.host;
    st.tokens_per_second = r.tokens_per_second.value_or(0);
    st.step_ms = r.step_ms.value_or(0);
    st.data_wait_ms = r.data_wait_ms.value_or(0);
    st.comm_total_ms = r.comm_total_ms.value_or(0);
    st.comm_exposed_ms = r.comm_exposed_ms.value_or(0);
    st.memory = MemoryOf(rep);
    tps_sum += st.tokens_per_second;
    n.data_stall_ms_per_step = std::max(n.data_stall_ms_per_step, st.data_wait_ms);
    if (auto p = PeakOf(st.memory)) peak_fresh = std::max(peak_fresh.value_or(0), *p);
    n.ranks.push_back(st);
  }
  n.scaling.tokens_per_second = tps_sum;
  n.scaling.tokens_per_second_per_rank = tps_sum / world;
  if (single_tps && *single_tps > 0) n.scaling.efficiency = n.scaling.tokens_per_second_per_rank / *single_tps;
  const double step_ms = Mean(t.reports, &RankReport::step_ms);
  n.comm.backend = r0.backend.value_or("");
  n.comm.total_ms_per_step = Mean(t.reports, &RankReport::comm_total_ms);
  n.comm.exposed_ms_per_step = Mean(t.reports, &RankReport::comm_exposed_ms);
  n.comm.exposed_fraction = step_ms > 0 ? n.comm.exposed_ms_per_step / step_ms : 0.0;
  n.comm.collectives_per_step = Mean(t.reports, &RankReport::collectives_per_step);
  n.comm.buckets = r0.buckets.value_or(0);
  n.comm.units = r0.units.value_or(0);
  SummarizeLevels(t.reports, &n.comm);
  if (r0.checkpoint) {
    n.checkpoint.path = r0.checkpoint->path;
    n.checkpoint.step = r0.checkpoint->step;
  }
  n.checkpoint.shards = world;
  for (const auto& r : t.reports) {
    if (!r->checkpoint) continue;
    n.checkpoint.bytes += r->checkpoint->bytes;
    n.checkpoint.save_seconds = std::max(n.checkpoint.save_seconds, r->checkpoint->seconds);
  }
  n.memory.fresh_peak_bytes = peak_fresh;
  const std::string ref = train.dir + "/final.safetensors";
  const double tol = std::max(cfg.eval.restore_tolerance, 0.0);
  Phase same{"resume", world, base + "/resume-w" + std::to_string(world), n.checkpoint.path, ref};
  PhaseOutcome s = RunPhase(o, cfg, same, data_ranks, *launcher);
  n.restore.push_back(CompareRestore(t, s, same, world, tol));
  for (size_t i = 0; i < s.reports.size() && i < n.ranks.size(); ++i) {
    n.ranks[i].memory_resumed = MemoryOf(s.reports[i]);
    if (auto p = PeakOf(n.ranks[i].memory_resumed)) {
      n.memory.resumed_peak_bytes = std::max(n.memory.resumed_peak_bytes.value_or(0), *p);
    }
  }
  int other = world > 1 ? 1 : (data_ranks > 1 ? data_ranks : 0);
  // Ranks across nodes (srun in an allocation of several): the other
  // restore is at one node's share of them, a restore onto fewer nodes.
  if (nodes > 1 && world % nodes == 0 && world / nodes > 1) other = world / nodes;
  std::optional<PhaseOutcome> x;
  if (other > 0) {
    Phase oth{"resume-other", other, base + "/resume-w" + std::to_string(other), n.checkpoint.path, ref};
    x = RunPhase(o, cfg, oth, data_ranks, *launcher);
    n.restore.push_back(CompareRestore(t, *x, oth, world, tol));
  }
  bool all_equal = true;
  for (const NodeRestore& r : n.restore) {
    all_equal = all_equal && r.equal;
    std::fprintf(stderr, "pilot: node: restore %d -> %d: %s (max rel loss diff %.3g, max rel param diff %.3g)%s%s\n",
                 r.from_world_size, r.world_size, r.equal ? "equal" : "NOT equal", r.max_rel_loss_diff,
                 r.max_rel_param_diff, r.detail.empty() ? "" : ": ", r.detail.c_str());
  }
  std::fprintf(stderr, "pilot: node: %d x %.0f tok/s per rank (%s, %s), comm %.1f ms/step, %.1f ms exposed\n",
               world, n.scaling.tokens_per_second_per_rank, n.mode.c_str(), n.comm.backend.c_str(),
               n.comm.total_ms_per_step, n.comm.exposed_ms_per_step);
  if (!s.ok) return fail(s, "resume");
  if (x && !x->ok) return fail(*x, "resume-other");
  n.status = all_equal ? "ok" : "failed";
  return all_equal ? kExitOk : kExitFailed;
}

}  // namespace pilot::runner
