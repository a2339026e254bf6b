// The run bound to a pilot's grant (spank_pilot(8), BINDING): a job
// submitted with `pilot run PILOT` whose prolog admitted it (its run
// identity equals the grant's, job/binding.h) runs the pilot's
// program.command in place of its batch script, through the code that
// started the pilot's processes: the pilot's pinned config (root's copy in
// the pilot's job folder, its sha256 the lock's), its launch layout
// (PlaceProgram, PhaseRanks: one process per rank on this node, or one srun
// step of a task per rank across the job's nodes, torchrun's variables),
// its working folder, its pinned image and runtime, and its environment
// rules (ProgramEnv), as the job's user (RunGroup).
//
// What differs from the pilot's node stage, and only that:
//   PILOT_STEPS           run.target_steps, or the steps of run.target_tokens
//                         (the pilot ran training.steps)
//   PILOT_CHECKPOINT_STEP run.checkpoint_interval: a save after every
//                         multiple (the pilot saved once, at checkpoint.at_step)
//   PILOT_CHECKPOINT_DIR  OUT/checkpoints, OUT the job's --pilot-out, else
//                         SUBMIT_DIR/pilot-run-JOBID
//   PILOT_RESUME_DIR, PILOT_RESUME_STEP  a requeued run's: that folder and the
//                         step its pilot-resume.json names, the newest
//                         checkpoint the program marked complete
//                         (slurm_pilot.saved, pilot-program(7)), read as the user
//   PILOT_STAGE, PILOT_PROCESS  "run"
//   PILOT_METRICS         not set: the processes report to no one, their
//                         output goes to the job's (and no hang is judged)
// The ranks run on the job's own nodes and GPUs (at most the grant's,
// job_submit.lua). A builtin-model pilot's run is not bound this way yet:
// it is refused with a sentence.
//
// Returns the run's exit status: 0 when every process exited 0, else the
// first failing process's status (128 + signal for a signal), 1 when the
// run could not start (the reason on stderr, "pilot: job N: ...").
//
// Thread-safety: process-level (forks); the supervisor's single thread.
#pragma once

#include <cstdint>

#include "supervisor/supervise.h"

namespace pilot::supervisor {

int RunBoundRun(const SuperviseOptions& opts, int64_t pilot_job);

}  // namespace pilot::supervisor
