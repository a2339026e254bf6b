// The verdict's checks of a user's program that rest on what the
// supervisor measured itself (kChecks, core/decide/checks.h), never on the
// program's own figures:
//
//   checkpoint_read  the resumed process opened the checkpoint files the
//                    reference wrote (fanotify marks on every listed file:
//                    results.json's program.checkpoint_read)
//   busy             while it reported steps, the job's GPUs were busy
//                    (NVML), else its processes used the CPU (/proc):
//                    program.busy
//
// Thread-safety: pure.
#pragma once

#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/records/verdict.h"

namespace pilot {

// pass when the resumed process's tree opened files holding at least
// thresholds.min_checkpoint_read_fraction of the listed bytes; fail below,
// or without listed files; not watched (no fanotify, events lost): fail
// when program_independent_checks names checkpoint_read, else warn.
Check CheckpointReadCheck(const ProgramInfo& prog, const Policy& p);

// pass when every measured phase kept the GPUs at least
// thresholds.min_busy_device_utilization busy (where NVML sampled them) or
// thresholds.min_busy_cpu_cores CPU cores busy; fail naming the phases that
// kept neither; skip when no phase reported steps for 2 s.
Check BusyCheck(const ProgramInfo& prog, const Policy& p);

// The work the resumed process did before its first record against the
// reference's (ProgramInfo::starts, busy): K of the reference's steps cost
// W = K x (CPU seconds per step in its busy window); the resumed process
// spent E CPU seconds more than the reference before its first record.
// Loading may cost up to twice the reference's save (L = 2 x max(0, CPU
// between its records of K and K+1 less one step)), start-up varies by up
// to kResumeStartMargin. fail when E >= W/2 + L + margin (about half of
// the K steps done again); pass below; skip when W < 2 (L + margin), where
// a retrain could not be told from loading, or when the supervisor did not
// read the figures (no busy window, phases on other nodes). Per stage.
Check ResumedWorkCheck(const ProgramInfo& prog, int64_t checkpoint_step);
inline constexpr double kResumeStartMargin = 1.0;  // CPU seconds

// The precision check of a user's program: what its probe saw (autocast
// dtype and device, the parameters' dtype, a gradient scaler), or "not
// reported"; a program is never run at fp32 beside itself, so skip.
Check ProgramPrecisionCheck(const ProgramInfo& prog);

}  // namespace pilot
