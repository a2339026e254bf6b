#include "core/decide/program_checks.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/decide/checks.h"

namespace pilot {

// A program's resumed process opened the checkpoint the reference wrote:
// fanotify marks the supervisor set on every listed file (CheckpointRead).
// Not established (no fanotify, events lost) fails when the site requires
// the check to be root's (program_independent_checks), else warns.
Check CheckpointReadCheck(const ProgramInfo& prog, const Policy& p) {
  const CheckpointRead& cr = prog.checkpoint_read;
  const double min = p.thresholds.min_checkpoint_read_fraction;
  const std::string want = ">= " + FormatFixed(min * 100, 0) + "% of the checkpoint's bytes opened";
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
  const double frac = cr.bytes > 0 ? static_cast<double>(cr.opened_bytes) / static_cast<double>(cr.bytes)
                                   : static_cast<double>(cr.opened_files) / cr.files;
  const std::string measured = std::to_string(cr.opened_files) + " of " + std::to_string(cr.files) +
                               " files, " + FormatFixed(frac * 100, 1) + "% of " + FormatGiB(cr.bytes);
  if (frac + 1e-12 < min) {
    return add(CheckStatus::kFail, measured,
               cr.opened_files == 0
                   ? "the resumed process never opened the checkpoint the reference wrote: whatever "
                     "it reported, it did not restore from it"
                   : "the resumed process left most of the checkpoint unread: it did not restore "
                     "from it");
  }
  return add(CheckStatus::kPass, measured, "the resumed process opened the checkpoint the reference wrote");
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
    return make(CheckStatus::kSkip, "not measured", "no phase reported steps for 2 s or more");
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
