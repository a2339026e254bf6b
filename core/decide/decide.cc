#include "core/decide/decide.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string_view>

#include "core/base/rfc3339.h"
#include "core/base/strings.h"
#include "core/decide/checks.h"
#include "core/decide/memory_growth.h"
#include "core/decide/pin_checks.h"
#include "core/decide/program_checks.h"
#include "core/decide/ptrace_check.h"
#include "core/decide/restore_check.h"
#include "core/models/plan.h"

namespace pilot {
namespace {

__attribute__((format(printf, 1, 2))) std::string Fmt(const char* fmt, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string Sci(double v) { return Fmt("%.3g", v); }

// "SIGKILL (9)" for the signals a pilot's process meets, "signal N" else.
std::string SignalName(int sig) {
  static const std::pair<int, const char*> kNames[] = {{1, "SIGHUP"},   {2, "SIGINT"},   {6, "SIGABRT"},
                                                       {7, "SIGBUS"},   {9, "SIGKILL"},  {11, "SIGSEGV"},
                                                       {15, "SIGTERM"}, {24, "SIGXCPU"}, {25, "SIGXFSZ"}};
  for (const auto& [n, name] : kNames) {
    if (n == sig) return std::string(name) + " (" + std::to_string(sig) + ")";
  }
  return "signal " + std::to_string(sig);
}

// "node pn2 (Not responding)", "nodes pn2 (…), pn3 (…)".
std::string NodesPhrase(const std::vector<std::string>& nodes) {
  return std::string(nodes.size() > 1 ? "nodes " : "node ") + Join(nodes, ", ");
}

// Returns the single stage when the pilot completed, else records why not.
const SingleStage* CheckCompleted(const DecideInput& in, std::vector<Check>* out) {
  const std::string want = "single stage ok, exit 0";
  auto fail = [&](std::string measured, std::string detail) {
    out->push_back(MakeCheck(CheckName("completed"), CheckStatus::kFail, std::move(measured), want,
                             std::move(detail), VerifiedBy::kWorkload));
    return nullptr;
  };
  if (!in.results) {
    std::string why = in.results_error.empty() ? "results.json missing or invalid" : in.results_error;
    if (!in.nodes_down.empty()) why += "; Slurm has the job's " + NodesPhrase(in.nodes_down) + " down";
    return fail("no results", why);
  }
  const Results& r = *in.results;
  if (r.supervisor && r.supervisor->stopped) {
    const std::string why = !r.supervisor->stopped_reason.empty() ? r.supervisor->stopped_reason
                            : in.nodes_down.empty()
                                ? "the job was cancelled or reached its time limit"
                                : "the job ended while Slurm had its " + NodesPhrase(in.nodes_down) + " down";
    out->push_back(MakeCheck(CheckName("completed"), CheckStatus::kFail, "stopped", want,
                             "the pilot did not finish: " + why +
                                 (in.results_error.empty() ? "" : " (" + in.results_error + ")"),
                             VerifiedBy::kSupervisor));
    return nullptr;
  }
  if (!r.single) {
    // A workload process the supervisor saw end by a signal (SIGKILL from
    // a user, the kernel's OOM killer, a node's failure) wrote no report:
    // the supervisor's own record says so.
    if (r.supervisor) {
      for (const SupervisedProcess& p : r.supervisor->processes) {
        if (p.signal == 0) continue;
        const std::string sig = SignalName(p.signal);
        out->push_back(MakeCheck(
            CheckName("completed"), CheckStatus::kFail, p.role + " killed by " + sig, want,
            "the pilot was killed: its " + p.role + " process ended by " + sig + " after " +
                FormatFixed(p.wall_seconds, 1) + " s and wrote no results",
            VerifiedBy::kSupervisor));
        return nullptr;
      }
    }
    return fail("no single stage", "results.json has no single-stage results");
  }
  const SingleStage& s = *r.single;
  if (s.failure) {
    const FailureInfo& f = *s.failure;
    std::string mem;
    if (f.memory.peak_allocated_bytes)
      mem = ", peak allocated " + FormatGiB(*f.memory.peak_allocated_bytes);
    if (f.memory.device_total_bytes) mem += " of " + FormatGiB(*f.memory.device_total_bytes);
    std::string what = f.kind == "oom" ? "out of memory" : "error";
    if (r.program) {
      // The supervisor's sentence already says which process, step and why.
      out->push_back(MakeCheck(CheckName("completed"), CheckStatus::kFail,
                               what + " at step " + std::to_string(f.step), want, f.message,
                               VerifiedBy::kSupervisor));
      return nullptr;
    }
    return fail(what + " at step " + std::to_string(f.step) + " (" + f.phase + ")",
                what + " in " + f.phase + " at step " + std::to_string(f.step) + mem +
                    (f.message.empty() ? "" : ": " + f.message));
  }
  if (s.status != "ok") return fail("status " + s.status, "the single stage did not finish");
  // Exit 1 is "ran to the end, a check failed" (the restore): the checks
  // below say which; every other status is a run that did not finish.
  if (r.exit_code != 0 && r.exit_code != 1) {
    return fail("exit " + std::to_string(r.exit_code), "the runner exited with an error");
  }
  // A program's every process must have exited 0 by itself, whatever the
  // phase's other reasons (the supervisor's own record of each).
  if (r.program) {
    for (const ProgramProcess& p : r.program->processes) {
      if (p.exit_code == 0 && p.signal == 0 && !p.terminated) continue;
      const std::string how = p.signal != 0 ? "killed by " + SignalName(p.signal)
                              : p.terminated ? "ended by the supervisor"
                                             : "exit " + std::to_string(p.exit_code);
      out->push_back(MakeCheck(CheckName("completed"), CheckStatus::kFail,
                               p.stage + " " + p.process + " rank " + std::to_string(p.rank) + " " + how,
                               want,
                               "the " + p.stage + " stage's " + p.process + " process (rank " +
                                   std::to_string(p.rank) + ") did not exit 0 by itself: " + how,
                               VerifiedBy::kSupervisor));
      return &s;
    }
  }
  // The supervisor saw every process exit and wrote the results itself.
  const VerifiedBy by = r.supervisor ? VerifiedBy::kSupervisor : VerifiedBy::kWorkload;
  out->push_back(MakeCheck(CheckName("completed"), CheckStatus::kPass, "ok", want,
                           "load, steps, eval, checkpoint and restore ran", by));
  return &s;
}

// Returns whether the pilot's shape binds the run.
bool CheckShape(const Config& cfg, const SingleStage& s, const Results& r,
                std::vector<Check>* out) {
  const ShapeInfo& sh = s.shape;
  if (r.program && !r.program->shape_reported) {
    out->push_back(
        MakeCheck(CheckName("shape"), CheckStatus::kWarn, "not reported",
                  "seq_len " + std::to_string(cfg.run.seq_len) + ", micro_batch " +
                      std::to_string(cfg.run.micro_batch),
                  "the program reported no seq_len and micro_batch (slurm_pilot.step(seq_len=..., "
                  "micro_batch=...)): the verdict is not binding",
                  VerifiedBy::kWorkload));
    return false;
  }
  std::string measured =
      "seq_len " + std::to_string(sh.seq_len) + ", micro_batch " + std::to_string(sh.micro_batch) +
      (sh.optimizer_state_included ? ", optimizer state" : ", NO optimizer state");
  std::string want = "seq_len " + std::to_string(cfg.run.seq_len) + ", micro_batch " +
                     std::to_string(cfg.run.micro_batch) + ", optimizer state";
  bool equal = sh.seq_len == cfg.run.seq_len && sh.micro_batch == cfg.run.micro_batch;
  bool smaller = sh.seq_len <= cfg.run.seq_len && sh.micro_batch <= cfg.run.micro_batch;
  CheckStatus st = CheckStatus::kPass;
  std::string detail = "the pilot ran the long run's shape";
  if (!sh.optimizer_state_included) {
    st = CheckStatus::kFail;
    detail = "the pilot left out the optimizer state, which hides the memory it needs";
  } else if (!equal && smaller && cfg.training.allow_smaller_shape) {
    st = CheckStatus::kWarn;
    detail = "smaller shape allowed by training.allow_smaller_shape: the verdict is not binding";
  } else if (!equal) {
    st = CheckStatus::kFail;
    detail = "the pilot's shape differs from the run's";
  }
  if (const auto& rd = s.reduced_depth) {
    measured += ", " + std::to_string(rd->layers) + " of " + std::to_string(rd->full_layers) + " layers";
    if (st == CheckStatus::kPass) {
      detail += "; the single stage at reduced depth, as a sharded run whose state does not fit one GPU "
                "needs (" + rd->detail + ")";
    }
  }
  out->push_back(MakeCheck(CheckName("shape"), st, measured, want, detail, VerifiedBy::kWorkload));
  return equal && sh.optimizer_state_included;
}

void CheckSteps(const SingleStage& s, const Policy& p, std::vector<Check>* out) {
  int min = p.thresholds.min_pilot_steps;
  bool ok = s.steps >= min;
  out->push_back(MakeCheck(CheckName("steps"), ok ? CheckStatus::kPass : CheckStatus::kFail,
                           std::to_string(s.steps), ">= " + std::to_string(min),
                           ok ? "enough optimizer steps" : "too few optimizer steps for a verdict",
                           VerifiedBy::kWorkload));
}

// Bitwise on a CPU with deterministic kernels; elsewhere the noise rule of
// core/decide/restore_check.h, judged again here from the losses in
// results.json with the site's thresholds.
void CheckRestore(const SingleStage& s, VerifiedBy by, const Policy& p, std::vector<Check>* out) {
  const RestoreInfo& r = s.restore;
  const bool bitwise = r.mode == "bitwise", noise = r.mode == "noise";
  const Thresholds& t = p.thresholds;
  const NoiseRule rule{t.restore_tolerance, t.restore_first_tolerance, t.restore_noise_margin};
  std::string want = bitwise ? "bitwise equal" : "rel diff <= " + Sci(rule.floor);
  std::string measured = "step " + std::to_string(r.from_step) + "->" + std::to_string(r.to_step) +
                         ", rel diff " + Sci(r.max_rel_loss_diff);
  if (!bitwise && r.first_tolerance > 0) {
    want = "first step <= " + Sci(rule.first) + ", then " + want;
    measured += ", first step " + Sci(r.first_rel_loss_diff);
  }
  if (noise) {
    want += " or within " + Sci(rule.margin) + "x a second resume's spread";
    measured += ", " + std::to_string(r.noise_steps) + " steps past " + Sci(r.tolerance) +
                " at most " + Sci(r.noise_max_ratio) + "x the spread";
  }
  CheckStatus st = CheckStatus::kPass;
  std::string detail = noise ? "a fresh process restored the checkpoint and resumed within the noise "
                               "of a second one resumed from it"
                             : "a fresh process restored the checkpoint and resumed equal";
  auto tolerated = [&] {
    if (bitwise) return r.max_abs_loss_diff == 0 && r.max_abs_param_diff == 0;
    if (r.first_rel_loss_diff > rule.first) return false;
    if (!noise) return r.max_rel_loss_diff <= rule.floor;
    std::vector<double> reference;
    for (int64_t i = std::max<int64_t>(0, r.from_step); i < r.to_step && i < static_cast<int64_t>(s.losses.size()); ++i) {
      reference.push_back(s.losses[static_cast<size_t>(i)]);
    }
    return JudgeNoise(reference, r.resumed_losses, r.repeat_losses, rule).pass;
  };
  if (!r.ran) {
    st = CheckStatus::kFail;
    measured = "not run";
    detail = "restore did not run" + (r.detail.empty() ? "" : ": " + r.detail);
  } else if (!r.skipped.empty()) {
    st = CheckStatus::kFail;
    detail = "restore comparison skipped (" + r.skipped + ")";
  } else if (!r.equal || !tolerated()) {
    st = CheckStatus::kFail;
    detail =
        "the resumed run differs from the reference" + (r.detail.empty() ? "" : ": " + r.detail);
  }
  out->push_back(MakeCheck(CheckName("restore"), st, measured, want, detail, by));
}

// The full-node stage, when the run had one: it must have finished, and every
// restore (same world size and another one) must have resumed equal. Scaling
// below the policy's minimum is a warning on GPUs; on a CPU the figure says
// little about the cluster and is only reported.
void CheckNode(const NodeStage& n, const Policy& p, bool on_gpu, std::vector<Check>* out) {
  std::string what = std::to_string(n.world_size) + " procs " + n.mode;
  std::vector<std::string> hosts;
  for (const NodeRankStats& r : n.ranks) {
    if (!r.host.empty() && std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  }
  if (hosts.size() > 1) what += " on " + std::to_string(hosts.size()) + " nodes";
  if (n.failure) {
    // A message that names its rank already (the srun launcher's) is not
    // prefixed with it again.
    std::string rank = n.failure->rank && n.failure->message.rfind("rank ", 0) != 0
                           ? "rank " + std::to_string(*n.failure->rank) + ": "
                           : "";
    out->push_back(MakeCheck(CheckName("node_stage"), CheckStatus::kFail,
                             what + ", failed in " + n.failure->phase, "completes",
                             rank + n.failure->message, VerifiedBy::kWorkload));
    return;
  }
  bool all_equal = !n.restore.empty();
  std::string measured;
  std::string detail = n.mode == "program"
                           ? "a fresh set of the program's processes resumed equal"
                           : "sharded checkpoint restored equal at every world size tried";
  for (const NodeRestore& r : n.restore) {
    if (!measured.empty()) measured += ", ";
    measured += std::to_string(r.from_world_size) + "->" + std::to_string(r.world_size) +
                (r.equal && r.ran && r.skipped.empty() ? " equal" : " NOT equal");
    if (!r.ran || !r.equal || !r.skipped.empty()) {
      all_equal = false;
      detail = !r.skipped.empty() ? "restore comparison skipped (" + r.skipped + ")"
                                  : (r.detail.empty() ? "a restore differs" : r.detail);
    }
  }
  if (n.restore.empty()) detail = "no restore ran in the node stage";
  out->push_back(MakeCheck(
      CheckName("node_restore"), all_equal ? CheckStatus::kPass : CheckStatus::kFail,
      what + (measured.empty() ? "" : ": " + measured), "equal", detail, VerifiedBy::kWorkload));
  if (n.comm.intra_node || n.comm.inter_node) {
    // Recorded, not judged: what one all-reduce of the gradients costs on
    // each level of a world across nodes.
    auto level = [](const std::optional<NodeCommLevel>& l, const std::string& where) {
      if (!l) return "none " + where;
      char b[96];
      std::snprintf(b, sizeof(b), "%.1f ms %s (%d ranks", l->allreduce_ms, where.c_str(), l->group_size);
      return std::string(b) + (l->groups > 1 ? " x " + std::to_string(l->groups) : "") + ")";
    };
    const int64_t bytes = n.comm.inter_node ? n.comm.inter_node->bytes : n.comm.intra_node->bytes;
    out->push_back(MakeCheck(
        CheckName("node_levels"), on_gpu ? CheckStatus::kPass : CheckStatus::kSkip,
        "all-reduce of " + Fmt("%.1f MB", static_cast<double>(bytes) / 1e6) + ": " +
            level(n.comm.intra_node, "within a node") + ", " +
            level(n.comm.inter_node, "between nodes"),
        "recorded",
        on_gpu ? "one all-reduce of the gradients' size on each level of the run's network"
               : "measured on CPU processes: not evidence about the cluster's network",
        VerifiedBy::kWorkload));
  }
  if (n.scaling.efficiency) {
    const double eff = *n.scaling.efficiency, min = p.thresholds.min_scaling_efficiency;
    CheckStatus st = !on_gpu ? CheckStatus::kSkip
                             : (eff >= min ? CheckStatus::kPass : CheckStatus::kWarn);
    std::string d = !on_gpu ? "measured on CPU processes: not evidence about GPU scaling"
                            : "per-GPU throughput against the single stage";
    out->push_back(MakeCheck(CheckName("scaling"), st,
                             Sci(eff) + ", comm exposed " + Sci(n.comm.exposed_fraction),
                             ">= " + Sci(min), d, VerifiedBy::kWorkload));
  }
}

void CheckCheckpoint(const VerifyReport& v, std::vector<Check>* out) {
  const std::string want = "manifest ok, complete, eval recomputed within tolerance";
  auto fail = [&](std::string measured, std::string detail) {
    out->push_back(MakeCheck(CheckName("checkpoint"), CheckStatus::kFail, std::move(measured), want,
                             std::move(detail), VerifiedBy::kEpilog));
  };
  if (!v.ran) return fail("not verified", "verification did not run: " + v.error);
  if (!v.complete_marker)
    return fail("no COMPLETE marker", "the checkpoint " + v.checkpoint + " is incomplete");
  if (!v.manifest_ok) return fail("manifest mismatch", v.manifest_detail);
  if (v.params_with_optimizer_state < v.params) {
    return fail(std::to_string(v.params_with_optimizer_state) + "/" + std::to_string(v.params) +
                    " params with optimizer state",
                "some parameters have no optimizer state in the checkpoint");
  }
  if (!v.eval_recomputed) return fail("eval not recomputed", "eval loss was not recomputed");
  if (!v.eval_within) {
    return fail("eval rel diff " + Sci(v.eval_rel_diff),
                "eval loss from the restored weights (" + Sci(v.eval_loss_recomputed) +
                    ") differs from the recorded one (" + Sci(v.eval_loss_recorded) + ")");
  }
  out->push_back(MakeCheck(CheckName("checkpoint"), CheckStatus::kPass,
                           std::to_string(v.files_checked) + " files, " + std::to_string(v.params) +
                               " params, eval rel diff " + Sci(v.eval_rel_diff),
                           want, "checkpoint re-read and checked by the epilog",
                           VerifiedBy::kEpilog));
}

// A program's checkpoint, in its own format: the files the supervisor
// listed when the reference process ended are still there unchanged, each
// one in a known format reads, and an optimizer's state is among them.
void CheckProgramCheckpoint(const VerifyReport& v, std::vector<Check>* out) {
  const std::string want = "unchanged since listed, readable, optimizer state";
  auto add = [&](CheckStatus st, std::string measured, std::string detail) {
    out->push_back(MakeCheck(CheckName("checkpoint"), st, std::move(measured), want,
                             std::move(detail), VerifiedBy::kEpilog));
  };
  if (!v.ran) return add(CheckStatus::kFail, "not verified", "verification did not run: " + v.error);
  if (v.files.empty()) {
    return add(CheckStatus::kFail, "no files", "the checkpoint " + v.checkpoint + " holds no files");
  }
  if (!v.manifest_ok) {
    return add(CheckStatus::kFail, "files changed",
               "the checkpoint changed after the supervisor listed it: " + v.manifest_detail);
  }
  if (!v.problems.empty()) {
    return add(CheckStatus::kFail, "unreadable",
               v.problems.front() +
                   (v.problems.size() > 1 ? " (and " + std::to_string(v.problems.size() - 1) + " more)" : ""));
  }
  const std::string measured = std::to_string(v.files.size()) + " files, " + v.format + ", " +
                               std::to_string(v.tensors) + " tensors" +
                               (v.optimizer_state ? ", optimizer state" : ", NO optimizer state");
  const bool read_formats = v.format == "torch" || v.format == "safetensors" || v.format == "mixed";
  if (!v.optimizer_state && read_formats) {
    return add(CheckStatus::kFail, measured,
               "no optimizer state in the checkpoint (a state_dict with \"state\" and "
               "\"param_groups\"): a resumed run starts its optimizer afresh");
  }
  if (!v.optimizer_state || !v.not_readable.empty()) {
    std::string which = v.not_readable.empty() ? "" : v.not_readable.front();
    if (v.not_readable.size() > 1) which += " and " + std::to_string(v.not_readable.size() - 1) + " more";
    return add(CheckStatus::kWarn, measured,
               "not independently readable" + (which.empty() ? std::string() : ": " + which) +
                   "; their hashes held since the supervisor listed them");
  }
  add(CheckStatus::kPass, measured, "checkpoint re-read file by file by the epilog, unchanged since listed");
}

// The GPU type the run wants: the config's run.gpu_type when the catalog
// knows it, else nullptr.
const GpuType* WantedGpu(const Config* cfg, const HardwareCatalog& cat) {
  if (cfg == nullptr || cfg->run.gpu_type.empty()) return nullptr;
  return cat.Find(cfg->run.gpu_type);
}

void CheckMemory(const SingleStage& s, const Config& cfg, const DecideInput& in,
                 const HardwareCatalog& cat, const Policy& p, std::vector<Check>* out) {
  auto peak = PeakDeviceBytes(s);
  double need = p.thresholds.memory_headroom;
  std::string want = Fmt(">= %.0f%% free", need * 100);
  if (!peak) {
    out->push_back(MakeCheck(
        CheckName("memory_headroom"), CheckStatus::kSkip, "no device memory figures", want,
        "the pilot ran on " + s.device + ": nothing to compare", VerifiedBy::kWorkload));
    return;
  }
  int64_t mem = 0;
  std::string where;
  if (const GpuType* g = WantedGpu(&cfg, cat)) {
    mem = g->memory_bytes;
    where = g->name;
  } else if (!in.lock.gpus.empty()) {
    mem = in.lock.gpus[0].memory_bytes;
    where = in.lock.gpus[0].name;
  } else if (s.memory.device_total_bytes) {
    mem = *s.memory.device_total_bytes;
    where = s.device_name;
  }
  if (mem <= 0) {
    out->push_back(MakeCheck(CheckName("memory_headroom"), CheckStatus::kWarn, FormatGiB(*peak),
                             want, "no GPU memory size known to compare with",
                             VerifiedBy::kWorkload));
    return;
  }
  // A sharded run's single stage at reduced depth measured a part of the
  // model: the run's own measured peak is the full-node stage's, per rank,
  // at full depth.
  std::string what = "the measured peak";
  if (s.reduced_depth) {
    const auto& n = in.results ? in.results->node : std::nullopt;
    if (!n || n->status != "ok" || !n->memory.fresh_peak_bytes || *n->memory.fresh_peak_bytes <= 0) {
      out->push_back(MakeCheck(
          CheckName("memory_headroom"), CheckStatus::kWarn,
          FormatGiB(*peak) + " at " + std::to_string(s.reduced_depth->layers) + " of " +
              std::to_string(s.reduced_depth->full_layers) + " layers",
          want,
          "the single stage ran at reduced depth and no full-node stage measured the full depth "
          "sharded: the run's memory is predicted only (memory_fit)",
          VerifiedBy::kWorkload));
      return;
    }
    peak = std::max(*n->memory.fresh_peak_bytes, n->memory.resumed_peak_bytes.value_or(0));
    what = "the full-node stage's per-rank peak at full depth (the single stage ran " +
           std::to_string(s.reduced_depth->layers) + " of " + std::to_string(s.reduced_depth->full_layers) +
           " layers)";
  }
  double free = 1.0 - static_cast<double>(*peak) / static_cast<double>(mem);
  bool ok = free >= need;
  out->push_back(MakeCheck(
      CheckName("memory_headroom"), ok ? CheckStatus::kPass : CheckStatus::kFail,
      FormatGiB(*peak) + " of " + FormatGiB(mem) + " on " + where +
          Fmt(" (%.0f%% free)", free * 100),
      want,
      ok ? what + " fits with headroom"
         : "too little memory left at " + (s.reduced_depth ? what : std::string("the peak")),
      VerifiedBy::kWorkload));
}

void CheckPrecision(const SingleStage& s, const Policy& p, std::vector<Check>* out) {
  const PrecisionCheck& pc = s.precision_check;
  double tol = p.thresholds.precision_loss_tolerance;
  std::string want = "rel loss diff vs fp32 <= " + Sci(tol);
  if (s.shape.precision == "fp32" || s.shape.precision.empty()) {
    out->push_back(MakeCheck(CheckName("precision"), CheckStatus::kSkip, "fp32", want,
                             "full precision: nothing to compare", VerifiedBy::kWorkload));
    return;
  }
  if (!pc.ran) {
    out->push_back(MakeCheck(CheckName("precision"), CheckStatus::kWarn, "not measured", want,
                             s.shape.precision + " was not compared with fp32" +
                                 (pc.detail.empty() ? "" : ": " + pc.detail),
                             VerifiedBy::kWorkload));
    return;
  }
  bool ok = pc.max_rel_loss_diff <= tol;
  out->push_back(
      MakeCheck(CheckName("precision"), ok ? CheckStatus::kPass : CheckStatus::kFail,
                s.shape.precision + " rel diff " + Sci(pc.max_rel_loss_diff), want,
                ok ? "lower precision tracks fp32" : "lower precision diverges from fp32",
                VerifiedBy::kWorkload));
}

// Hardware fit per candidate from the memory model (core/models/memory_model.h)
// at the run's shape and layout; without a plan (no results or no config)
// every candidate is listed with "no memory measurement".
std::vector<HardwareFit> FitHardware(const Plan* plan, const Config* cfg,
                                     const HardwareCatalog& cat) {
  std::vector<HardwareFit> fits;
  if (plan != nullptr) {
    for (const GpuOption& o : plan->options) {
      HardwareFit f;
      f.gpu_type = o.gpu.name;
      f.memory_bytes = o.gpu.memory_bytes;
      f.predicted_peak_bytes = o.memory.total_bytes;
      f.headroom = o.fit.headroom;
      f.fits = o.fit.fits;
      f.note = o.fit.note;
      if (plan->breakdown.source == "analytic") {
        f.note = "estimated without device measurements" + (f.note.empty() ? "" : "; " + f.note);
      }
      fits.push_back(f);
    }
    return fits;
  }
  std::vector<std::string> names = cfg != nullptr ? cfg->hardware.candidates : cat.Names();
  for (const auto& name : names) {
    const GpuType* g = cat.Find(name);
    if (g == nullptr) continue;
    HardwareFit f;
    f.gpu_type = g->name;
    f.memory_bytes = g->memory_bytes;
    f.note = "no memory measurement";
    fits.push_back(f);
  }
  return fits;
}

// memory_fit: the predicted peak of the run on its GPU type (run.gpu_type,
// else the plan's choice) within (1 - memory_headroom) of its memory.
void CheckMemoryFit(const Plan& plan, const Policy& p, std::vector<Check>* out) {
  const std::string want =
      Fmt("predicted <= %.0f%% of GPU memory", (1 - p.thresholds.memory_headroom) * 100);
  if (plan.chosen < 0) {
    out->push_back(MakeCheck(CheckName("memory_fit"), CheckStatus::kWarn, "no GPU type", want,
                             "none of the candidate GPU types is in the catalog",
                             VerifiedBy::kWorkload));
    return;
  }
  const GpuOption& o = plan.options[static_cast<size_t>(plan.chosen)];
  const MemoryQuery& q = plan.memory_query;
  std::string layout = q.mode + (q.gpus > 1 ? Fmt(" x%d", q.gpus) : "") +
                       (q.activation_checkpointing ? ", recompute" : "");
  std::string measured = FormatGiB(o.memory.total_bytes) + " of " + FormatGiB(o.gpu.memory_bytes) + " on " +
                         o.gpu.name + " (" + layout + ", " + o.memory.basis + ")";
  std::string detail = "the run's shape fits " + o.gpu.name + " with headroom";
  if (!o.fit.fits) {
    std::string others;
    for (const GpuOption& x : plan.options) {
      if (x.fit.fits) others += (others.empty() ? "" : ", ") + x.gpu.name;
    }
    detail = "the run's shape does not fit " + o.gpu.name +
             (others.empty() ? "; no candidate fits: try --mode sharded or activation "
                               "checkpointing (pilot plan)"
                             : "; fits: " + others);
  }
  out->push_back(MakeCheck(CheckName("memory_fit"),
                           o.fit.fits ? CheckStatus::kPass : CheckStatus::kFail, measured, want,
                           detail, VerifiedBy::kWorkload));
}

// budget: fail when the whole pipeline does not fit a 30-day term, warn
// when it exceeds the term the user asked for.
void CheckBudget(const Budget& b, const Config& cfg, std::vector<Check>* out) {
  std::string want = "<= " + Fmt("%g", cfg.run.reservation_days) + " days requested, <= 30 days";
  if (b.days <= 0) {
    out->push_back(MakeCheck(CheckName("budget"), CheckStatus::kSkip, "no throughput", want,
                             "no throughput measured to estimate from", VerifiedBy::kWorkload));
    return;
  }
  std::string measured = Fmt("%.1f days", b.days) + " (" + b.term + ")";
  if (b.term == "none") {
    out->push_back(
        MakeCheck(CheckName("budget"), CheckStatus::kFail, measured, want,
                  Fmt("does not fit a 30-day term: %.1f days incl. buffer (train %.1f, ", b.days,
                      b.breakdown.count("train") ? b.breakdown.at("train") : 0.0) +
                      Fmt("%.0f GPU-hours); use more nodes or fewer tokens", b.gpu_hours),
                  VerifiedBy::kWorkload));
    return;
  }
  bool ok = b.days <= cfg.run.reservation_days;
  out->push_back(MakeCheck(
      CheckName("budget"), ok ? CheckStatus::kPass : CheckStatus::kWarn, measured, want,
      ok ? "the estimated pipeline fits the requested term"
         : "the estimated pipeline does not fit the requested term: plan a longer or wider run",
      VerifiedBy::kWorkload));
}

// The policy's independent_checks pass only when something other than the
// workload established them: a pass the workload alone vouches for fails.
// A user's program: program_independent_checks, where the figures the
// supervisor compared (workload_compared) are the program's word too.
void RequireIndependent(const Policy& p, bool program, std::vector<Check>* checks) {
  const std::vector<std::string>& required = program ? p.program_independent_checks : p.independent_checks;
  for (Check& c : *checks) {
    if (c.status != CheckStatus::kPass) continue;
    if (c.verified_by != VerifiedBy::kWorkload && c.verified_by != VerifiedBy::kSelfReported &&
        c.verified_by != VerifiedBy::kWorkloadCompared) {
      continue;
    }
    if (std::find(required.begin(), required.end(), c.name) == required.end()) continue;
    c.status = CheckStatus::kFail;
    c.detail = "only the workload vouches for this (" + c.detail +
               "); the site requires the supervisor, epilog or prolog to (" +
               (program ? "program_independent_checks" : "independent_checks") + ")";
  }
}

}  // namespace

std::optional<int64_t> PeakDeviceBytes(const SingleStage& s) {
  std::optional<int64_t> peak;
  auto take = [&](const std::optional<int64_t>& v) {
    if (v && *v > 0 && (!peak || *v > *peak)) peak = v;
  };
  for (const MemoryStats* m : {&s.memory, &s.memory_first_step}) {
    take(m->device_used_bytes);
    take(m->peak_reserved_bytes);
    take(m->peak_allocated_bytes);
  }
  if (s.memory_resumed) {
    take(s.memory_resumed->device_used_bytes);
    take(s.memory_resumed->peak_reserved_bytes);
    take(s.memory_resumed->peak_allocated_bytes);
  }
  return peak;
}

Verdict Decide(const DecideInput& in, const Policy& policy, const HardwareCatalog& catalog,
               int64_t now) {
  Verdict v;
  v.job.id = in.lock.job.id;
  v.job.user = in.lock.job.user;
  v.job.config_sha256 = in.lock.config.sha256_copied;
  v.instance = in.lock.instance;
  v.identity = in.lock.identity;
  if (in.config) v.job.run = in.config->run.name;
  v.issued = FormatRfc3339(now);
  v.expires = FormatRfc3339(now + int64_t{86400} * policy.thresholds.verdict_lifetime_days);

  std::vector<Check>& checks = v.checks;
  CheckPinning(in, &checks);
  CheckNodesPinned(in, &checks);
  CheckContainerTag(in, &checks);
  CheckContainerRan(in, &checks);
  CheckConfig(in, &checks);
  CheckPins(in, &checks);
  const SingleStage* s = CheckCompleted(in, &checks);
  if (std::optional<Check> c = PtraceScopeCheck(in.results ? &*in.results : nullptr, policy)) {
    checks.push_back(std::move(*c));
  }
  const Config* cfg = in.config ? &*in.config : nullptr;
  bool binding = false;
  if (s != nullptr && cfg != nullptr) {
    binding = CheckShape(*cfg, *s, *in.results, &checks);
    CheckSteps(*s, policy, &checks);
    // The comparison is the supervisor's when it started both processes and
    // compared their reports; a program's losses stay the program's word.
    const bool compared = in.results->supervisor && in.results->supervisor->restore_compared;
    const VerifiedBy by = in.results->program ? VerifiedBy::kWorkloadCompared
                          : compared          ? VerifiedBy::kSupervisor
                                              : VerifiedBy::kWorkload;
    CheckRestore(*s, by, policy, &checks);
    if (in.results->program) {
      checks.push_back(CheckpointReadCheck(*in.results->program, policy));
      checks.push_back(BusyCheck(*in.results->program, policy));
      checks.push_back(ResumedWorkCheck(*in.results->program, cfg->checkpoint.at_step));
    }
  }
  if (in.results && in.results->program) {
    CheckProgramCheckpoint(in.verify, &checks);
  } else {
    CheckCheckpoint(in.verify, &checks);
  }
  if (s != nullptr && cfg != nullptr) {
    CheckMemory(*s, *cfg, in, catalog, policy, &checks);
    if (in.results->program) {
      checks.push_back(MemoryGrowthCheck(*in.results, *cfg, catalog));
      checks.push_back(ProgramPrecisionCheck(*in.results->program));
    } else {
      CheckPrecision(*s, policy, &checks);
    }
  }
  if (in.results && in.results->node) {
    CheckNode(*in.results->node, policy, s != nullptr && s->device == "cuda", &checks);
  }
  std::optional<Plan> plan;
  std::string no_plan;  // why there is no plan, when the pilot ran to the end
  if (s != nullptr && cfg != nullptr && s->shape.params <= 0) {
    no_plan = in.results->program
                  ? "the program reported no parameter count (slurm_pilot.step with model=, or "
                    "params in its records: pilot-program(7))"
                  : "the pilot measured no parameter count";
  }
  if (s != nullptr && cfg != nullptr && s->shape.params > 0) {
    std::optional<NodeMeasurement> node;
    if (in.results->node) node = NodeMeasurementFrom(*in.results->node);
    // The runner's own calibration (a smaller micro-batch) when it has one.
    PlanQuery verdict_plan;
    verdict_plan.replay_memory = false;
    verdict_plan.native_extensions = ExtensionsToQualify(*in.results);
    Result<Plan> p = MakePlan(*s, *cfg, catalog, policy, verdict_plan, CalibrationFrom(*s), node);
    if (p.ok()) {
      plan = std::move(*p);
    } else {
      no_plan = "no plan could be made: " + p.status().Message();
    }
  }
  v.hardware = FitHardware(plan ? &*plan : nullptr, cfg, catalog);
  if (plan) {
    v.budget = plan->budget;
    CheckMemoryFit(*plan, policy, &checks);
    CheckBudget(v.budget, *cfg, &checks);
  } else if (!no_plan.empty()) {
    // Said, not left out: a verdict without a budget cannot be granted.
    checks.push_back(MakeCheck(CheckName("budget"), CheckStatus::kSkip, "no budget",
                               "<= " + Fmt("%g", cfg->run.reservation_days) + " days requested, <= 30 days",
                               no_plan + "; without a budget the verdict recommends no hardware and "
                                         "pilot grant refuses it",
                               VerifiedBy::kWorkload));
  }

  RequireIndependent(policy, in.results && in.results->program, &checks);
  v.binding = binding;
  bool any_fail = std::any_of(checks.begin(), checks.end(),
                              [](const Check& c) { return c.status == CheckStatus::kFail; });
  if (!any_fail && in.results && in.results->exit_code != 0) {
    // A failed check of the run's own that none of the above explains.
    for (Check& c : checks) {
      if (c.name != CheckName("completed")) continue;
      c.status = CheckStatus::kFail;
      c.measured = "exit " + std::to_string(in.results->exit_code);
      c.detail = "the pilot reported a failed check that no verdict check explains";
      any_fail = true;
    }
  }
  v.decision = any_fail ? Decision::kNoGo : Decision::kGo;
  return v;
}

}  // namespace pilot
