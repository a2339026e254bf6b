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

// The precision check of a user's program: what its probe saw (autocast
// dtype and device, the parameters' dtype, a gradient scaler), or "not
// reported"; a program is never run at fp32 beside itself, so skip.
Check ProgramPrecisionCheck(const ProgramInfo& prog);

}  // namespace pilot
