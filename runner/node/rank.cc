// A rank of the node stage with the builtin workload: one phase (train or
// resume) of the distributed run, reported in <phase dir>/rank-NNNNN.json.
#include <c10/util/Exception.h>
#include <signal.h>
#include <unistd.h>

#ifdef PILOT_RUNNER_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/records/exit_codes.h"
#include "core/records/rank_report.h"
#include "launch/rank_env.h"
#include "runner/ckpt/checkpoint.h"
#include "runner/ckpt/compare.h"
#include "runner/ckpt/node_checkpoint.h"
#include "runner/ckpt/safetensors.h"
#include "runner/node/comm.h"
#include "runner/node/engine.h"
#include "runner/node/rank.h"
#include "runner/node/stage.h"
#include "runner/train/device.h"
#include "runner/train/inputs.h"
#include "runner/train/session.h"

namespace pilot::runner {
namespace fs = std::filesystem;
using launch::RankFromEnv;
using launch::RankInfo;
namespace {

std::optional<std::string> Getenv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end && *end == 0 && n > 0 && n < (1 << 30)) ? static_cast<int>(n) : fallback;
}

// An exception's message without the C++ backtrace libtorch appends to
// what(), at most 1000 bytes.
std::string WithoutBacktrace(std::string m) {
  const size_t cut = m.find("\nException raised from");
  if (cut != std::string::npos) m.resize(cut);
  if (m.size() > 1000) m.resize(1000);
  return m;
}

// The test switch PILOT_RUNNER_TEST_CRASH_RANK=R[:STEP] (pilot-runner(1)):
// rank R kills itself with SIGKILL before step STEP (default 2).
void MaybeCrash(int rank, int64_t step) {
  std::optional<std::string> v = Getenv("PILOT_RUNNER_TEST_CRASH_RANK");
  if (!v || v->empty()) return;
  const size_t colon = v->find(':');
  const int r = std::atoi(v->substr(0, colon).c_str());
  const int64_t at = colon == std::string::npos ? 2 : std::atoll(v->substr(colon + 1).c_str());
  if (r != rank || step != at) return;
  std::fprintf(stderr,
               "pilot: node: rank %d: test crash before step %lld (PILOT_RUNNER_TEST_CRASH_RANK)\n",
               rank, static_cast<long long>(step));
  std::fflush(nullptr);
  ::kill(::getpid(), SIGKILL);
}

// Across nodes: one all-reduce of `bytes` (at most 64 MiB) timed within
// this rank's node and between the nodes (the ranks at this rank's place
// on each node); nullopt when the world is on one node. Every rank of the
// world calls it at the same point. Throws as a collective does.
std::optional<RankCommProbe> ProbeLevels(Comm& comm, const RankInfo& info, const at::Device& device,
                                         int64_t bytes, std::chrono::milliseconds timeout) {
  const std::string key = "probe/node-of/";
  comm.StoreSet(key + std::to_string(info.rank), std::to_string(info.node_id));
  std::vector<int> node_of(static_cast<size_t>(info.world_size));
  for (int r = 0; r < info.world_size; ++r)
    node_of[r] = std::atoi(comm.StoreGet(key + std::to_string(r)).c_str());
  std::vector<int> nodes = node_of;
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  if (nodes.size() < 2) return std::nullopt;
  auto ranks_on = [&](int node) {
    std::vector<int> m;
    for (int r = 0; r < info.world_size; ++r) {
      if (node_of[r] == node) m.push_back(r);
    }
    return m;
  };
  const std::vector<int> intra = ranks_on(info.node_id);
  const size_t place =
      static_cast<size_t>(std::find(intra.begin(), intra.end(), info.rank) - intra.begin());
  std::vector<int> inter;
  for (int node : nodes) {
    const std::vector<int> m = ranks_on(node);
    if (place < m.size()) inter.push_back(m[place]);
  }
  RankCommProbe p;
  p.nodes = static_cast<int>(nodes.size());
  const int64_t numel = std::max<int64_t>(1, std::min<int64_t>(bytes, int64_t{64} << 20) / 4);
  p.bytes = numel * 4;
  at::Tensor buf = at::zeros({numel}, at::TensorOptions().dtype(at::kFloat).device(device));
  // item() waits for the device, where a collective's Wait only orders it.
  auto time = [&buf](Comm& g) {
    constexpr int kTimed = 5;
    g.AllReduce(buf);
    (void)buf[0].item<float>();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kTimed; ++i) g.AllReduce(buf);
    (void)buf[0].item<float>();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
               .count() /
           kTimed;
  };
  auto group = [&](const std::string& name, const std::vector<int>& members) {
    Result<std::unique_ptr<Comm>> g = comm.Subgroup(name, members, device, timeout);
    if (!g.ok()) throw std::runtime_error("communication: " + g.status().ToString());
    return std::move(g).value();
  };
  if (intra.size() > 1) {
    p.intra_size = static_cast<int>(intra.size());
    p.intra_ms = time(*group("intra-" + std::to_string(info.node_id), intra));
  }
  if (inter.size() > 1) {
    p.inter_size = static_cast<int>(inter.size());
    p.inter_ms = time(*group("inter-" + std::to_string(place), inter));
  }
  return p;
}

// The failure that ends a rank's phase early: its exit code and message.
struct Failure {
  int code;
  std::string message;
};

// This rank's session, communicator and engine. The session is made first,
// so that a failure while making the others names its phase.
struct RankParts {
  std::unique_ptr<Session> s;
  std::unique_ptr<Comm> comm;
  std::unique_ptr<NodeEngine> e;
};

// The report's fields known before the phase runs: the rank, its place,
// the phase, and the node it runs on.
RankReport StartReport(const RankInfo& info, bool resume) {
  RankReport rep;
  rep.rank = info.rank;
  rep.world_size = info.world_size;
  rep.local_rank = info.local_rank;
  rep.node_id = info.node_id;
  rep.launcher = info.launcher;
  rep.phase = resume ? "resume" : "train";
  // Slurm's name for the node (nodes may share a host name: several
  // slurmd on one machine), else the host name.
  if (auto n = Getenv("SLURMD_NODENAME"); n && !n->empty()) {
    rep.host = *n;
  } else {
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    rep.host = host;
  }
  return rep;
}

// Makes this rank's session, communicator and engine into *p, in that
// order, and records the backend and the engine's layout in *rep. Throws
// as libtorch does.
std::optional<Failure> MakeParts(const Config& cfg, const Pins& pins, const RankInfo& info,
                                 int data_ranks, std::chrono::seconds timeout, RankParts* p,
                                 RankReport* rep) {
#ifdef PILOT_RUNNER_CUDA
  // One GPU per rank, made current before anything touches CUDA (the
  // session resolves "cuda" to the current device, NCCL builds its
  // communicator there). Modulo the visible count: srun may bind each
  // task to its own GPU (CUDA_VISIBLE_DEVICES of one device).
  if (cfg.training.device != "cpu" && CudaAvailable()) {
    const int n = static_cast<int>(c10::cuda::device_count());
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(info.local_rank % n));
  }
#endif
  Result<std::unique_ptr<Session>> made = Session::Create(cfg, pins);
  if (!made.ok()) return Failure{kExitUsage, made.status().ToString()};
  p->s = std::move(made).value();
  Result<std::unique_ptr<Comm>> cm = Comm::Create(info, p->s->device(), timeout);
  if (!cm.ok()) return Failure{kExitError, cm.status().ToString()};
  p->comm = std::move(cm).value();
  rep->backend = p->comm->backend();
  Result<std::unique_ptr<NodeEngine>> em =
      NodeEngine::Create(p->s.get(), p->comm.get(), p->s->cfg().parallel.mode, data_ranks);
  if (!em.ok()) return Failure{kExitUsage, em.status().ToString()};
  p->e = std::move(em).value();
  rep->mode = p->e->mode();
  rep->data_ranks = data_ranks;
  rep->buckets = p->e->buckets();
  rep->units = p->e->units();
  return std::nullopt;
}

// Loads the node checkpoint into the engine: *first becomes the step after
// the saved one, and *rewind_data says whether the data's place is left
// out (a test switch). Records the load in *rep.
std::optional<Failure> Restore(const std::string& checkpoint, NodeEngine& e, int64_t* first,
                               bool* rewind_data, RankReport* rep) {
  NodeCheckpointInfo ci;
  Result<NodeCheckpointIo> io = LoadNodeCheckpoint(checkpoint, e, &ci);
  if (!io.ok()) return Failure{kExitUsage, io.status().ToString()};
  *first = ci.step + 1;
  // Test switch (pilot-runner(1)): leave parts out so that the
  // comparison must fail.
  const RestoreSkips skips = RestoreSkips::FromEnv();
  if (skips.optimizer) e.optim().Reset();
  *rewind_data = skips.data;
  rep->skipped = skips.Describe();
  rep->load = RankLoad{io->path, io->bytes, io->seconds, ci.world_size};
  return std::nullopt;
}

// The sums over a phase's timed steps (not the measured step, not the
// checkpoint's, not the warm-up).
struct StepSums {
  double ms = 0, wait = 0, compute = 0, exposed = 0, opt = 0, busy = 0;
  int64_t collectives = 0;
  int timed = 0;
};

// The timed steps' means into the report.
void AverageTimedSteps(const StepSums& sum, int64_t tokens_per_rank_step, RankReport* rep) {
  rep->timed_steps = sum.timed;
  if (sum.timed == 0) return;
  const double step_ms = sum.ms / sum.timed;
  rep->step_ms = step_ms;
  rep->tokens_per_second = static_cast<double>(tokens_per_rank_step) * 1000.0 / step_ms;
  rep->data_wait_ms = sum.wait / sum.timed;
  rep->compute_ms = sum.compute / sum.timed;
  rep->comm_total_ms = sum.busy / sum.timed;
  rep->comm_exposed_ms = sum.exposed / sum.timed;
  rep->optimizer_ms = sum.opt / sum.timed;
  rep->collectives_per_step = static_cast<double>(sum.collectives) / sum.timed;
}

// The phase's steps from `first` to training.steps: the memory measured at
// one step, the others timed, the node checkpoint saved at its step (train
// phase). *current is the step running, for a failure's message. Throws as
// libtorch does.
std::optional<Failure> RunPhaseSteps(const RunOptions& o, const RankInfo& info,
                                     const std::string& dir, const RankParts& p, int data_ranks,
                                     int64_t first, int64_t param_bytes, int64_t* current,
                                     RankReport* rep) {
  Session& s = *p.s;
  Comm& comm = *p.comm;
  NodeEngine& e = *p.e;
  const Config& c = s.cfg();
  const bool resume = !o.resume_checkpoint.empty();
  const int64_t n = c.training.steps, at = c.checkpoint.at_step;
  const int64_t measure =
      std::min<int64_t>(n, resume ? first : std::max<int64_t>(2, c.training.warmup_steps + 1));
  std::vector<double> losses, norms;
  StepSums sum;
  (void)comm.TakeBusySeconds(nullptr);
  for (int64_t step = first; step <= n; ++step) {
    *current = step;
    MaybeCrash(info.rank, step);
    const bool mem = step == measure;
    if (mem) ResetPeak(s.device());
    const auto t0 = std::chrono::steady_clock::now();
    NodeStepOut r = e.Step(step);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    int64_t colls = 0;
    const double busy = comm.TakeBusySeconds(&colls);
    if (mem) {
      rep->memory = RankMemory(Snapshot(s.device(), step));
      rep->memory->forward_peak_allocated_bytes = r.forward_peak_allocated_bytes;
    }
    losses.push_back(r.loss);
    norms.push_back(r.grad_norm);
    const bool is_timed =
        !mem && step != at && step >= first + (resume ? 1 : c.training.warmup_steps);
    if (is_timed) {
      sum.ms += ms;
      sum.wait += r.data_wait_ms;
      sum.compute += r.compute_ms;
      sum.exposed += r.comm_exposed_ms;
      sum.opt += r.optimizer_ms;
      sum.busy += busy * 1000.0;
      sum.collectives += colls;
      ++sum.timed;
    }
    if (info.rank == 0) {
      std::fprintf(stderr,
                   "pilot: node %s w%d step %lld/%lld loss %.4f %.0f ms (comm exposed %.1f ms)\n",
                   e.mode().c_str(), info.world_size, static_cast<long long>(step),
                   static_cast<long long>(n), r.loss, ms, r.comm_exposed_ms);
    }
    if (!resume && step == at) {
      const std::string root =
          (c.checkpoint.dir.empty() ? o.out + "/node" : c.checkpoint.dir + "/node") +
          "/checkpoints";
      NodeCheckpointInfo ci{step, info.world_size, data_ranks, e.mode(), s.seed(), 0};
      // Then rank 0 writes the final parameters, every rank its report,
      // the stage results.json: room for them is checked with the save's.
      Result<NodeCheckpointIo> io =
          SaveNodeCheckpoint(root, e, comm, ci, RoomAfterSave(c.checkpoint, dir, param_bytes));
      if (!io.ok()) return Failure{kExitError, io.status().ToString()};
      rep->checkpoint = RankCheckpoint{io->path, step, io->bytes, io->seconds};
    }
  }
  rep->first_step = first;
  rep->losses = losses;
  rep->grad_norms = norms;
  AverageTimedSteps(sum, e.TokensPerRankStep(), rep);
  return std::nullopt;
}

// Final parameters: whole on every rank; rank 0 writes them (train phase)
// or compares them with the reference (resume phase).
std::optional<Failure> FinishParameters(const RunOptions& o, const RankInfo& info,
                                        const std::string& dir, NodeEngine& e, int64_t n,
                                        RankReport* rep) {
  e.Gather();
  if (info.rank != 0) return std::nullopt;
  if (o.resume_checkpoint.empty()) {
    Result<FileDigest> w =
        WriteSafetensors(dir + "/final.safetensors", e.Parameters(), {{"step", std::to_string(n)}});
    if (!w.ok()) return Failure{kExitError, w.status().ToString()};
  } else if (!o.reference_params.empty()) {
    Result<ParamDiff> d = CompareParameters(e.Parameters(), o.reference_params);
    if (!d.ok()) return Failure{kExitError, d.status().ToString()};
    rep->max_abs_param_diff = d->max_abs;
    rep->max_rel_param_diff = d->max_rel;
    rep->params_compared = static_cast<int64_t>(e.Parameters().size());
  }
  return std::nullopt;
}

// The train phase's all-reduce timed within a node and between nodes
// (ProbeLevels), into the report; rank 0 says what it found.
void ProbeCommunication(const RankInfo& info, const RankParts& p, int64_t param_bytes,
                        std::chrono::seconds timeout, RankReport* rep) {
  p.s->set_phase("communication");
  rep->comm_probe = ProbeLevels(*p.comm, info, p.s->device(), param_bytes, timeout);
  if (rep->comm_probe && info.rank == 0) {
    const RankCommProbe& q = *rep->comm_probe;
    std::fprintf(
        stderr,
        "pilot: node: all-reduce of %.1f MB: %s within a node, %s between %d nodes (rank 0)\n",
        static_cast<double>(q.bytes) / 1e6,
        q.intra_ms ? (std::to_string(*q.intra_ms) + " ms").c_str() : "none",
        q.inter_ms ? (std::to_string(*q.inter_ms) + " ms").c_str() : "none", q.nodes);
  }
}

// The message of an exception that ended a phase at `step` in `phase`,
// naming communication where a collective or a peer failed.
std::string ExceptionMessage(const std::exception& ex, const std::string& phase, int64_t step) {
  const std::string what = ex.what();
  bool comm_failed = phase == "communication";
  for (const char* m :
       {"all-reduce failed", "all-gather failed", "reduce-scatter failed", "Connection closed",
        "Connection reset", "Timed out", "timed out", "NCCL"}) {
    comm_failed = comm_failed || what.find(m) != std::string::npos;
  }
  return std::string(comm_failed ? std::string(kPeerFailedMessage) + " (a peer rank died or timed out)"
                                 : "error") +
         " at step " + std::to_string(step) + " (" + phase + "): " + WithoutBacktrace(ex.what());
}

}  // namespace

int RunNodeRank(const RunOptions& o) {
  Result<RankInfo> ri = RankFromEnv(ProcessEnv());
  if (!ri.ok()) {
    std::fprintf(stderr, "%s\n", ri.status().ToString().c_str());
    return kExitUsage;
  }
  const RankInfo info = *ri;
  const bool resume = !o.resume_checkpoint.empty();
  const std::string dir =
      Getenv("PILOT_NODE_DIR").value_or(o.out + "/node/" + (resume ? "resume" : "train"));
  const std::string report = dir + "/" + [&] {
    char b[32];
    std::snprintf(b, sizeof(b), "rank-%05d.json", info.rank);
    return std::string(b);
  }();
  std::error_code ec;
  fs::create_directories(dir, ec);
  RankReport rep = StartReport(info, resume);
  auto finish = [&](int code, const std::string& message) {
    rep.status = code == kExitOk ? "ok" : "error";
    rep.exit_code = code;
    if (!message.empty()) {
      rep.message = message;
      std::fprintf(stderr, "pilot: node: rank %d: %s\n", info.rank, message.c_str());
    }
    Status w = WriteFileAtomic(report, RankReportToJson(rep));
    if (!w.ok()) std::fprintf(stderr, "%s\n", w.ToString().c_str());
    return code;
  };

  Config cfg;
  Pins pins;
  Status in = LoadInputs(o.config, o.lock, o.sets, &cfg, &pins);
  if (!in.ok()) return finish(kExitUsage, in.ToString());
  Result<std::string> alloc = ApplyAllocConf(cfg.training.alloc_conf);
  if (!alloc.ok()) return finish(kExitError, alloc.status().ToString());
  std::optional<NodeCheckpointInfo> saved;
  if (resume) {
    Result<NodeCheckpointInfo> m = ReadNodeManifest(o.resume_checkpoint);
    if (!m.ok()) return finish(kExitUsage, m.status().ToString());
    saved = *m;
    pins.seed = m->seed;
  }
  const int data_ranks = EnvInt("PILOT_DATA_RANKS", saved ? saved->data_ranks : info.world_size);
  const auto timeout = std::chrono::seconds(EnvInt("PILOT_RUNNER_NODE_TIMEOUT", 300));
  RankParts p;
  int64_t current = 0;
  try {
    if (auto f = MakeParts(cfg, pins, info, data_ranks, timeout, &p, &rep)) {
      return finish(f->code, f->message);
    }
    NodeEngine& e = *p.e;
    const int64_t n = p.s->cfg().training.steps;
    int64_t first = 1;
    bool rewind_data = false;
    if (resume) {
      p.s->set_phase("restore");
      if (auto f = Restore(o.resume_checkpoint, e, &first, &rewind_data, &rep)) {
        return finish(f->code, f->message);
      }
    }
    Status opened = rewind_data ? e.OpenData(pins, 1, n - first + 1) : e.OpenData(pins, first, n);
    if (!opened.ok()) return finish(kExitUsage, opened.ToString());
    // The whole model in fp32: the final parameters' file, and the
    // gradients the level probe all-reduces.
    int64_t param_bytes = 0;
    for (size_t i = 0; i < e.Parameters().size(); ++i) param_bytes += e.Numel(i) * 4;
    if (auto f = RunPhaseSteps(o, info, dir, p, data_ranks, first, param_bytes, &current, &rep)) {
      return finish(f->code, f->message);
    }
    if (auto f = FinishParameters(o, info, dir, e, n, &rep)) return finish(f->code, f->message);
    e.Release();
    if (!resume) ProbeCommunication(info, p, param_bytes, timeout, &rep);
    p.comm->Barrier();
  } catch (const std::exception& ex) {
    const std::string phase = p.s ? p.s->phase() : "build";
    rep.failure = RankFailure{phase, current, IsOutOfMemory(ex)};
    return finish(IsOutOfMemory(ex) ? kExitOutOfMemory : kExitError,
                  ExceptionMessage(ex, phase, current));
  }
  return finish(kExitOk, "");
}

}  // namespace pilot::runner
