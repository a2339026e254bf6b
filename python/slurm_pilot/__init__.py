"""The slurm-pilot probe: what a training program reports to its pilot.

Call ``slurm_pilot.step(loss, ...)`` once after each optimizer step, and
``saved(step, ...)`` / ``restored(step, ...)`` around the checkpoint. Inside a
pilot (``PILOT_METRICS`` set) each writes one JSON line to the pilot's
metrics sink: a step record, or an object with a "kind" ("env" once per
process, "state" for the fingerprints of a save or a restore). A step
record whose numbers are still on the GPU is written once they have reached
the host, without waiting for the device (a later step() call, the last
step, or exit). Outside a pilot every function is a cheap no-op, so the same
program runs unchanged; in the run a pilot's grant binds (``bound()``) only
``saved()`` acts: it marks the checkpoint a requeued run resumes from.
See pilot-program(7).
"""

from slurm_pilot import _state, _watch
from slurm_pilot._env import MAX_DISTRIBUTIONS, MAX_EXTENSIONS  # noqa: F401
from slurm_pilot._fingerprint import restored, saved
from slurm_pilot._pilot import (active, bound, checkpoint_dir, checkpoint_due, checkpoint_step,
                                process, resume_dir, resume_step, stage, steps)
from slurm_pilot._report import CORE_FIELDS, step  # noqa: F401
from slurm_pilot._sink import MAX_LINE  # noqa: F401

__all__ = [
    "active", "bound", "steps", "checkpoint_step", "checkpoint_due", "checkpoint_dir",
    "resume_dir", "resume_step", "stage", "process", "saved", "restored", "step",
]


if active():  # torch imported first: watch its mixed precision from now on
    _watch.watch()
