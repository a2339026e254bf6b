#include "core/decide.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "core/rfc3339.h"

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

std::string GiB(int64_t bytes) {
  return Fmt("%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

std::string Sci(double v) { return Fmt("%.3g", v); }

Check MakeCheck(std::string name, CheckStatus st, std::string measured, std::string threshold,
                std::string detail, VerifiedBy by) {
  return Check{std::move(name),   st, std::move(measured), std::move(threshold),
               std::move(detail), by};
}

void CheckPinning(const DecideInput& in, std::vector<Check>* out) {
  if (in.lock.problems.empty()) {
    std::string pinned =
        in.lock.container.method == "none" ? "no container" : in.lock.container.digest;
    out->push_back(MakeCheck(
        "pinning", CheckStatus::kPass, std::to_string(in.lock.files.size()) + " files, " + pinned,
        "no problems", "config, seeds, container, files and versions pinned", VerifiedBy::kProlog));
    return;
  }
  for (const auto& p : in.lock.problems) {
    out->push_back(MakeCheck("pinning", CheckStatus::kFail, p.code, "no problems", p.detail,
                             VerifiedBy::kProlog));
  }
}

void CheckConfig(const DecideInput& in, std::vector<Check>* out) {
  const LockConfig& c = in.lock.config;
  auto fail = [&](std::string measured, std::string detail) {
    out->push_back(MakeCheck("config_unchanged", CheckStatus::kFail, std::move(measured),
                             "sha256 at submit = copy = run", std::move(detail),
                             VerifiedBy::kProlog));
  };
  if (c.sha256_submitted.empty() || c.sha256_copied.empty()) {
    return fail("not recorded", "the config's sha256 was not recorded at submit and copy");
  }
  if (c.sha256_submitted != c.sha256_copied) {
    return fail(c.sha256_copied.substr(0, 12) + " != " + c.sha256_submitted.substr(0, 12),
                "the config " + c.path + " changed between submit and job start");
  }
  if (!in.config) {
    return fail("unreadable", "the copied config could not be read: " + in.config_error);
  }
  if (in.results && !in.results->config_sha256.empty() &&
      in.results->config_sha256 != c.sha256_copied) {
    return fail("runner used " + in.results->config_sha256.substr(0, 12),
                "the runner ran a different config than the one pinned");
  }
  out->push_back(MakeCheck("config_unchanged", CheckStatus::kPass, c.sha256_copied.substr(0, 12),
                           "sha256 at submit = copy = run", "config unchanged since submit",
                           VerifiedBy::kProlog));
}

// Returns the single stage when the pilot completed, else records why not.
const SingleStage* CheckCompleted(const DecideInput& in, std::vector<Check>* out) {
  const std::string want = "single stage ok, exit 0";
  auto fail = [&](std::string measured, std::string detail) {
    out->push_back(MakeCheck("completed", CheckStatus::kFail, std::move(measured), want,
                             std::move(detail), VerifiedBy::kSelfReported));
    return nullptr;
  };
  if (!in.results) {
    return fail("no results",
                in.results_error.empty() ? "results.json missing or invalid" : in.results_error);
  }
  const Results& r = *in.results;
  if (!r.single) return fail("no single stage", "results.json has no single-stage results");
  const SingleStage& s = *r.single;
  if (s.failure) {
    const FailureInfo& f = *s.failure;
    std::string mem;
    if (f.memory.peak_allocated_bytes)
      mem = ", peak allocated " + GiB(*f.memory.peak_allocated_bytes);
    if (f.memory.device_total_bytes) mem += " of " + GiB(*f.memory.device_total_bytes);
    std::string what = f.kind == "oom" ? "out of memory" : "error";
    return fail(what + " at step " + std::to_string(f.step) + " (" + f.phase + ")",
                what + " in " + f.phase + " at step " + std::to_string(f.step) + mem +
                    (f.message.empty() ? "" : ": " + f.message));
  }
  if (s.status != "ok") return fail("status " + s.status, "the single stage did not finish");
  if (r.exit_code != 0) {
    return fail("exit " + std::to_string(r.exit_code), "the runner exited with an error");
  }
  out->push_back(MakeCheck("completed", CheckStatus::kPass, "ok", want,
                           "load, steps, eval, checkpoint and restore ran",
                           VerifiedBy::kSelfReported));
  return &s;
}

// Returns whether the pilot's shape binds the run.
bool CheckShape(const Config& cfg, const SingleStage& s, std::vector<Check>* out) {
  const ShapeInfo& sh = s.shape;
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
  out->push_back(MakeCheck("shape", st, measured, want, detail, VerifiedBy::kSelfReported));
  return equal && sh.optimizer_state_included;
}

void CheckSteps(const SingleStage& s, const Policy& p, std::vector<Check>* out) {
  int min = p.thresholds.min_pilot_steps;
  bool ok = s.steps >= min;
  out->push_back(MakeCheck("steps", ok ? CheckStatus::kPass : CheckStatus::kFail,
                           std::to_string(s.steps), ">= " + std::to_string(min),
                           ok ? "enough optimizer steps" : "too few optimizer steps for a verdict",
                           VerifiedBy::kSelfReported));
}

void CheckRestore(const SingleStage& s, const VerifyReport& v, const Policy& p,
                  std::vector<Check>* out) {
  const RestoreInfo& r = s.restore;
  bool bitwise = r.mode == "bitwise";
  double tol = p.thresholds.restore_tolerance;
  std::string want = bitwise ? "bitwise equal" : "rel diff <= " + Sci(tol);
  std::string measured = "step " + std::to_string(r.from_step) + "->" + std::to_string(r.to_step) +
                         ", rel diff " + Sci(r.max_rel_loss_diff);
  VerifiedBy by =
      v.ran && v.eval_recomputed && v.eval_within ? VerifiedBy::kEpilog : VerifiedBy::kSelfReported;
  CheckStatus st = CheckStatus::kPass;
  std::string detail = "a fresh process restored the checkpoint and resumed equal";
  if (!r.ran) {
    st = CheckStatus::kFail;
    measured = "not run";
    detail = "restore did not run" + (r.detail.empty() ? "" : ": " + r.detail);
  } else if (!r.skipped.empty()) {
    st = CheckStatus::kFail;
    detail = "restore comparison skipped (" + r.skipped + ")";
  } else if (!r.equal || (bitwise ? (r.max_abs_loss_diff != 0 || r.max_abs_param_diff != 0)
                                  : r.max_rel_loss_diff > tol)) {
    st = CheckStatus::kFail;
    detail =
        "the resumed run differs from the reference" + (r.detail.empty() ? "" : ": " + r.detail);
  }
  out->push_back(MakeCheck("restore", st, measured, want, detail, by));
}

void CheckCheckpoint(const VerifyReport& v, std::vector<Check>* out) {
  const std::string want = "manifest ok, complete, eval recomputed within tolerance";
  auto fail = [&](std::string measured, std::string detail) {
    out->push_back(MakeCheck("checkpoint", CheckStatus::kFail, std::move(measured), want,
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
  out->push_back(MakeCheck("checkpoint", CheckStatus::kPass,
                           std::to_string(v.files_checked) + " files, " + std::to_string(v.params) +
                               " params, eval rel diff " + Sci(v.eval_rel_diff),
                           want, "checkpoint re-read and checked by the epilog",
                           VerifiedBy::kEpilog));
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
    out->push_back(MakeCheck("memory_headroom", CheckStatus::kSkip, "no device memory figures",
                             want, "the pilot ran on " + s.device + ": nothing to compare",
                             VerifiedBy::kSelfReported));
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
    out->push_back(MakeCheck("memory_headroom", CheckStatus::kWarn, GiB(*peak), want,
                             "no GPU memory size known to compare with",
                             VerifiedBy::kSelfReported));
    return;
  }
  double free = 1.0 - static_cast<double>(*peak) / static_cast<double>(mem);
  bool ok = free >= need;
  out->push_back(MakeCheck(
      "memory_headroom", ok ? CheckStatus::kPass : CheckStatus::kFail,
      GiB(*peak) + " of " + GiB(mem) + " on " + where + Fmt(" (%.0f%% free)", free * 100), want,
      ok ? "the measured peak fits with headroom" : "too little memory left at the peak",
      VerifiedBy::kSelfReported));
}

void CheckPrecision(const SingleStage& s, const Policy& p, std::vector<Check>* out) {
  const PrecisionCheck& pc = s.precision_check;
  double tol = p.thresholds.precision_loss_tolerance;
  std::string want = "rel loss diff vs fp32 <= " + Sci(tol);
  if (s.shape.precision == "fp32" || s.shape.precision.empty()) {
    out->push_back(MakeCheck("precision", CheckStatus::kSkip, "fp32", want,
                             "full precision: nothing to compare", VerifiedBy::kSelfReported));
    return;
  }
  if (!pc.ran) {
    out->push_back(MakeCheck("precision", CheckStatus::kWarn, "not measured", want,
                             s.shape.precision + " was not compared with fp32" +
                                 (pc.detail.empty() ? "" : ": " + pc.detail),
                             VerifiedBy::kSelfReported));
    return;
  }
  bool ok = pc.max_rel_loss_diff <= tol;
  out->push_back(
      MakeCheck("precision", ok ? CheckStatus::kPass : CheckStatus::kFail,
                s.shape.precision + " rel diff " + Sci(pc.max_rel_loss_diff), want,
                ok ? "lower precision tracks fp32" : "lower precision diverges from fp32",
                VerifiedBy::kSelfReported));
}

// Hardware fit per candidate. A first, uncalibrated model: the peak the
// pilot measured is what the run needs per GPU on every type (same shape,
// same per-GPU batch). A calibrated memory model (allocator and runtime
// overheads per stack, sharding) comes later.
std::vector<HardwareFit> FitHardware(const SingleStage* s, const Config* cfg,
                                     const HardwareCatalog& cat, const Policy& p) {
  std::vector<HardwareFit> fits;
  std::optional<int64_t> peak;
  bool from_rss = false;
  if (s != nullptr) {
    peak = PeakDeviceBytes(*s);
    if (!peak && s->memory.process_peak_rss_bytes) {
      peak = s->memory.process_peak_rss_bytes;
      from_rss = true;
    }
  }
  std::vector<std::string> names = cfg != nullptr ? cfg->hardware.candidates : cat.Names();
  for (const auto& name : names) {
    const GpuType* g = cat.Find(name);
    if (g == nullptr) continue;
    HardwareFit f;
    f.gpu_type = g->name;
    f.memory_bytes = g->memory_bytes;
    if (!peak) {
      f.note = "no memory measurement";
      fits.push_back(f);
      continue;
    }
    f.predicted_peak_bytes = *peak;
    f.headroom = 1.0 - static_cast<double>(*peak) / static_cast<double>(g->memory_bytes);
    f.fits = f.headroom >= p.thresholds.memory_headroom;
    std::vector<std::string> notes;
    if (from_rss) notes.push_back("estimated from CPU process memory");
    if (g->stack == "rocm") notes.push_back("needs ROCm qualification");
    if (!f.fits) notes.push_back("does not fit with the required headroom");
    for (size_t i = 0; i < notes.size(); ++i) f.note += (i ? "; " : "") + notes[i];
    fits.push_back(f);
  }
  return fits;
}

// Budget: days = target tokens / (measured tokens/s x GPUs), plus
// checkpoint, eval, data movement and preprocessing, plus the policy's
// buffer. Simple by design: it assumes linear scaling across GPUs and the
// measured device; a calibrated model (node-stage scaling, other GPU types)
// comes later.
Budget MakeBudget(const SingleStage* s, const Config* cfg, const HardwareCatalog& cat,
                  const Policy& p) {
  Budget b;
  if (s == nullptr || cfg == nullptr || s->tokens_per_second <= 0) return b;
  const RunConfig& run = cfg->run;
  const double gpus = std::max(1, run.nodes) * std::max(1, run.gpus_per_node);
  const double tokens_per_step =
      static_cast<double>(run.seq_len) * run.micro_batch * std::max(1, run.grad_accum) * gpus;
  double tokens = static_cast<double>(run.target_tokens);
  double steps = static_cast<double>(run.target_steps);
  if (tokens <= 0) tokens = steps * tokens_per_step;
  if (steps <= 0 && tokens_per_step > 0) steps = tokens / tokens_per_step;
  const double day = 86400.0;
  double train = tokens / (s->tokens_per_second * gpus) / day;
  double ckpt = 0;
  if (run.checkpoint_interval > 0) {
    ckpt = std::floor(steps / static_cast<double>(run.checkpoint_interval)) *
           s->checkpoint.save_seconds / day;
  }
  double eval = 0;
  if (run.eval_interval > 0) {
    eval =
        std::floor(steps / static_cast<double>(run.eval_interval)) * s->timings.eval_seconds / day;
  }
  // Data in and artifacts out at the measured checkpoint write rate (the
  // only storage rate the pilot measures).
  double io = 0;
  if (s->checkpoint.save_gb_per_s > 0) {
    io = (run.dataset_gb + run.export_gb) / s->checkpoint.save_gb_per_s / day;
  }
  double prep = run.preprocess_hours / 24.0;
  double sum = train + ckpt + eval + io + prep;
  double buffer = sum * p.thresholds.budget_buffer;
  b.breakdown = {{"train", train}, {"checkpoint", ckpt}, {"eval", eval},
                 {"data_io", io},  {"preprocess", prep}, {"buffer", buffer}};
  b.days = sum + buffer;
  b.gpu_hours = b.days * 24 * gpus;
  b.term = b.days <= 7 ? "7-day" : b.days <= 30 ? "30-day" : "none";
  if (const GpuType* g = WantedGpu(cfg, cat)) {
    b.cost = b.gpu_hours * g->price_per_gpu_hour;
    b.currency = cat.currency;
  }
  return b;
}

void CheckBudget(const Budget& b, const Config& cfg, std::vector<Check>* out) {
  std::string want = "<= " + Fmt("%g", cfg.run.reservation_days) + " days requested";
  if (b.days <= 0) {
    out->push_back(MakeCheck("budget", CheckStatus::kSkip, "no throughput", want,
                             "no throughput measured to estimate from", VerifiedBy::kSelfReported));
    return;
  }
  bool ok = b.days <= cfg.run.reservation_days;
  out->push_back(MakeCheck(
      "budget", ok ? CheckStatus::kPass : CheckStatus::kWarn,
      Fmt("%.1f days", b.days) + " (" + b.term + ")", want,
      ok ? "the estimated run fits the requested term"
         : "the estimated run does not fit the requested term: plan a longer or wider run",
      VerifiedBy::kSelfReported));
}

void CheckContainerTag(const DecideInput& in, std::vector<Check>* out) {
  const LockContainer& c = in.lock.container;
  if (in.container_digest_now.empty() || c.method != "registry") return;
  bool same = in.container_digest_now == c.digest;
  out->push_back(MakeCheck("container_tag", same ? CheckStatus::kPass : CheckStatus::kWarn,
                           in.container_digest_now, "= " + c.digest,
                           same ? "the tag still points at the pinned image"
                                : "the tag " + c.reference +
                                      " moved during the job; the pilot ran the pinned " +
                                      c.digest + ": use the pinned reference for the long run",
                           VerifiedBy::kEpilog));
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
  if (in.config) v.job.run = in.config->run.name;
  v.issued = FormatRfc3339(now);
  v.expires = FormatRfc3339(now + int64_t{86400} * policy.thresholds.verdict_lifetime_days);

  std::vector<Check>& checks = v.checks;
  CheckPinning(in, &checks);
  CheckContainerTag(in, &checks);
  CheckConfig(in, &checks);
  const SingleStage* s = CheckCompleted(in, &checks);
  const Config* cfg = in.config ? &*in.config : nullptr;
  bool binding = false;
  if (s != nullptr && cfg != nullptr) {
    binding = CheckShape(*cfg, *s, &checks);
    CheckSteps(*s, policy, &checks);
    CheckRestore(*s, in.verify, policy, &checks);
  }
  CheckCheckpoint(in.verify, &checks);
  if (s != nullptr && cfg != nullptr) {
    CheckMemory(*s, *cfg, in, catalog, policy, &checks);
    CheckPrecision(*s, policy, &checks);
  }
  v.hardware = FitHardware(s, cfg, catalog, policy);
  v.budget = MakeBudget(s, cfg, catalog, policy);
  if (s != nullptr && cfg != nullptr) CheckBudget(v.budget, *cfg, &checks);

  v.binding = binding;
  bool any_fail = std::any_of(checks.begin(), checks.end(),
                              [](const Check& c) { return c.status == CheckStatus::kFail; });
  v.decision = any_fail ? Decision::kNoGo : Decision::kGo;
  return v;
}

}  // namespace pilot
