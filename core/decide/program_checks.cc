#include "core/decide/program_checks.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/decide/checks.h"

namespace pilot {

// A program's resumed process read the checkpoint the reference wrote
// before it reported a step: the pages of every listed file cached again
// after the supervisor dropped them, with fanotify marks naming who opened
// them (CheckpointRead). Where the page cache cannot tell (read_problem),
// the files the resumed process opened decide, and the detail says so. An
// open by another process of the user fails: its reads would count. Not
// watched (no fanotify, events lost) fails when the site requires the check
// to be root's (program_independent_checks), else warns.
Check CheckpointReadCheck(const ProgramInfo& prog, const Policy& p) {
  const CheckpointRead& cr = prog.checkpoint_read;
  const double min = p.thresholds.min_checkpoint_read_fraction;
  const std::string want = ">= " + FormatFixed(min * 100, 0) + "% of the checkpoint's bytes read before its first step";
  const bool required = std::find(p.program_independent_checks.begin(), p.program_independent_checks.end(),
                                  "checkpoint_read") != p.program_independent_checks.end();
  auto add = [&](CheckStatus st, const std::string& measured, const std::string& detail) {
    return Check{std::string(CheckName("checkpoint_read")), st, measured, want, detail,
                 VerifiedBy::kSupervisor};
  };
  if (cr.files == 0) {
    return add(CheckStatus::kFail, "no files", "no checkpoint files were listed for the resumed process to read");
  }
  if (!cr.watched) {
    return add(required ? CheckStatus::kFail : CheckStatus::kWarn, "not watched",
               "the supervisor could not see which files the resumed process opened (" +
                   (cr.problem.empty() ? std::string("not recorded") : cr.problem) + ")" +
                   (required ? "; the site requires it (program_independent_checks)" : ""));
  }
  if (cr.outside_opens > 0) {
    return add(CheckStatus::kFail, std::to_string(cr.outside_opens) + " opens outside the job",
               "another process of the job's user (" + cr.outside_example + ") opened the checkpoint while the " +
                   "resumed process ran: what that process read cannot be told from the resumed process's reads");
  }
  const double bytes = static_cast<double>(cr.bytes);
  const std::string files = " of " + std::to_string(cr.files) + " files";
  const std::string when = cr.first_record_seconds >= 0
                               ? ", " + FormatFixed(cr.first_record_seconds, 1) + " s after its start"
                               : ", and it reported no step";
  const std::string never =
      "the resumed process never opened the checkpoint the reference wrote: whatever it reported, it did "
      "not restore from it";
  if (cr.read_measured) {
    const double frac = cr.bytes > 0 ? static_cast<double>(cr.read_bytes) / bytes : 1.0;
    const std::string measured = "read " + FormatBytes(static_cast<double>(cr.read_bytes), ByteUnit::kKiB) +
                                 " of " + FormatBytes(bytes, ByteUnit::kKiB) + " (" + FormatFixed(frac * 100, 1) +
                                 "%) in " + std::to_string(cr.read_files) + files + " before its first step" + when;
    if (frac + 1e-12 < min) {
      return add(CheckStatus::kFail, measured,
                 cr.opened_files == 0
                     ? never
                     : "the resumed process opened " + std::to_string(cr.opened_files) + files +
                           " but left most of the checkpoint unread before its first step: it did not "
                           "restore from it");
    }
    return add(CheckStatus::kPass, measured,
               "the resumed process read the checkpoint the reference wrote before its first step (its pages "
               "cached again after the supervisor dropped them)");
  }
  const double frac = cr.bytes > 0 ? static_cast<double>(cr.opened_bytes) / bytes
                                   : static_cast<double>(cr.opened_files) / cr.files;
  const std::string measured = "opened " + std::to_string(cr.opened_files) + files + ", " +
                               FormatFixed(frac * 100, 1) + "% of " + FormatBytes(bytes, ByteUnit::kKiB);
  const std::string unmeasured = "; the bytes it read were not measured (" +
                                 (cr.read_problem.empty() ? std::string("not recorded") : cr.read_problem) +
                                 "): the files it opened decide";
  if (frac + 1e-12 < min) {
    return add(CheckStatus::kFail, measured,
               (cr.opened_files == 0 ? never
                                     : "the resumed process left most of the checkpoint unopened: it did not "
                                       "restore from it") +
                   unmeasured);
  }
  return add(CheckStatus::kPass, measured, "the resumed process opened the checkpoint the reference wrote" + unmeasured);
}

// A program's processes worked while they reported steps: the job's GPUs
// busy (NVML) where measured, or their CPU time (/proc), per phase, as the
// supervisor measured them; either suffices, so that a GPU the sampler
// misattributes cannot fail a program that works. A program that reports
// losses it never computes keeps neither busy. Skip when no phase ran long
// enough (2 s).
Check BusyCheck(const ProgramInfo& prog, const Policy& p) {
  const double cores = p.thresholds.min_busy_cpu_cores;
  const double util = p.thresholds.min_busy_device_utilization;
  const std::string want = "GPUs >= " + FormatFixed(util * 100, 0) + "% busy, or >= " +
                           FormatFixed(cores, 2) + " CPU cores";
  auto make = [&](CheckStatus st, const std::string& measured, const std::string& detail) {
    return Check{std::string(CheckName("busy")), st, measured, want, detail, VerifiedBy::kSupervisor};
  };
  if (prog.busy.empty()) {
    return make(CheckStatus::kSkip, "not measured",
                "no phase reported steps for 2 s or more; pilot grant refuses a verdict whose work "
                "root did not measure");
  }
  std::vector<std::string> idle, seen;
  for (const PhaseBusy& b : prog.busy) {
    const bool gpu = b.device_utilization >= 0;
    const std::string what = b.stage + " " + b.process + ": " +
                             (gpu ? "GPUs " + FormatFixed(b.device_utilization * 100, 0) + "% busy, " : "") +
                             FormatFixed(b.cpu_cores, 2) + " CPU cores over " + FormatFixed(b.seconds, 0) + " s";
    seen.push_back(what);
    if (!(gpu && b.device_utilization >= util) && b.cpu_cores < cores) idle.push_back(what);
  }
  if (!idle.empty()) {
    return make(CheckStatus::kFail, idle.front(),
                "the program's processes kept the node idle while they reported steps (" +
                    Join(idle, "; ") + "): the losses were not computed there");
  }
  return make(CheckStatus::kPass, seen.front(), Join(seen, "; "));
}

namespace {

const PhaseStart* StartOf(const ProgramInfo& prog, const std::string& stage, const std::string& process) {
  for (const PhaseStart& s : prog.starts) {
    if (s.stage == stage && s.process == process) return &s;
  }
  return nullptr;
}

const PhaseBusy* BusyOf(const ProgramInfo& prog, const std::string& stage, const std::string& process) {
  for (const PhaseBusy& b : prog.busy) {
    if (b.stage == stage && b.process == process) return &b;
  }
  return nullptr;
}

std::string Cpu(double s) { return FormatFixed(s, s < 10 ? 2 : 1) + " CPU-s"; }

}  // namespace

Check ResumedWorkCheck(const ProgramInfo& prog, int64_t checkpoint_step) {
  const std::string want = "the resumed process's work before step K+1 below half of K reference steps "
                           "beyond the reference's start, loading and a " +
                           Cpu(kResumeStartMargin) + " margin";
  Check c{std::string(CheckName("resumed_work")), CheckStatus::kSkip, "not measured", want, "",
          VerifiedBy::kSupervisor};
  std::vector<std::string> seen, unclear;
  for (const char* stage : {"single", "node"}) {
    const PhaseStart* ref = StartOf(prog, stage, "reference");
    const PhaseStart* res = StartOf(prog, stage, "resumed");
    const PhaseBusy* busy = BusyOf(prog, stage, "reference");
    if (ref == nullptr || res == nullptr) continue;
    if (busy == nullptr || busy->steps <= 0 || busy->cpu_cores <= 0) {
      unclear.push_back(std::string(stage) + ": the reference's work per step was not measured (fewer than "
                        "2 s of steps, or its processes ran where the supervisor does not read them)");
      continue;
    }
    const double per_step = busy->cpu_cores * busy->seconds / busy->steps;
    const double k_work = per_step * static_cast<double>(checkpoint_step);
    // The CPU between the reference's records of K and K+1 is its save and one step.
    const double load = ref->save_step_cpu_seconds < 0
                            ? 0
                            : 2 * std::max(0.0, ref->save_step_cpu_seconds - per_step);
    const double extra = res->cpu_seconds - ref->cpu_seconds;
    const double limit = k_work / 2 + load + kResumeStartMargin;
    const std::string words =
        std::string(stage) + ": the resumed process worked " + Cpu(res->cpu_seconds) + " before step " +
        std::to_string(res->first_step) + " (" + FormatFixed(res->seconds, 1) + " s after its start), the reference " +
        Cpu(ref->cpu_seconds) + " before step " + std::to_string(ref->first_step) + "; " +
        std::to_string(checkpoint_step) + " steps cost the reference " + Cpu(k_work) +
        (ref->save_step_cpu_seconds < 0 ? "" : ", its save " + Cpu(load / 2));
    if (extra >= limit) {
      c.status = CheckStatus::kFail;
      c.measured = FormatFixed(extra, 2) + " CPU-s more than the reference";
      c.detail = words + ": the resumed process did about " +
                 FormatFixed(std::min(1e6, (extra - load) / std::max(per_step, 1e-9)), 0) +
                 " steps' work before it reported step K+1, as a process that trains steps 1..K again "
                 "does; a restore costs loading only";
      return c;
    }
    if (k_work < 2 * (load + kResumeStartMargin)) {
      unclear.push_back(words + ": too little work to tell a retrain from start-up and loading");
      continue;
    }
    seen.push_back(words);
    c.measured = FormatFixed(extra, 2) + " CPU-s more than the reference";
  }
  if (!seen.empty()) {
    c.status = CheckStatus::kPass;
    c.detail = Join(seen, "; ") + ": resumed, not trained again";
    return c;
  }
  c.detail = unclear.empty() ? "the supervisor read no phase's start (no records)" : Join(unclear, "; ");
  c.detail += "; the grant does not rest on this check";
  return c;
}

Check ProgramPrecisionCheck(const ProgramInfo& prog) {
  const ProgramPrecision& pr = prog.precision;
  Check c{std::string(CheckName("precision")), CheckStatus::kSkip, "not reported", "",
          "", VerifiedBy::kWorkload};
  if (!pr.reported) {
    c.detail = "the program's records carried no precision (slurm_pilot.step with model= reports "
               "it; pilot-program(7)): the pilot makes no claim about it";
    return c;
  }
  std::vector<std::string> parts;
  if (!pr.autocast.empty()) {
    parts.push_back(pr.autocast + " autocast" + (pr.autocast_device.empty() ? "" : " on " + pr.autocast_device) +
                    " (" + std::to_string(pr.autocast_steps) + " of " + std::to_string(pr.steps) + " steps)");
  } else {
    parts.push_back("no autocast");
  }
  if (!pr.param_dtype.empty()) parts.push_back(pr.param_dtype + " parameters");
  parts.push_back(pr.grad_scaler ? "gradient scaler" : "no gradient scaler");
  c.measured = Join(parts, ", ");
  c.detail = "as the program's probe saw it; a program is not run at fp32 beside itself, so its "
             "loss is not compared with fp32";
  return c;
}

}  // namespace pilot
