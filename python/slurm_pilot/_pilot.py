"""What the pilot tells the program: its PILOT_* environment variables."""

from __future__ import annotations

import os

from slurm_pilot._util import env_int
from slurm_pilot._watch import watch


def active() -> bool:
    """True inside a pilot: PILOT_METRICS names the metrics sink."""
    return bool(os.environ.get("PILOT_METRICS"))


def steps() -> int | None:
    """The number of optimizer steps to run (PILOT_STEPS), or None."""
    if active():
        watch()
    return env_int("PILOT_STEPS")


def bound() -> bool:
    """True in the run a pilot's grant binds (PILOT_STAGE "run"): nothing is reported, a
    checkpoint is due after every multiple of PILOT_CHECKPOINT_STEP, and a requeued run resumes
    from the newest one saved() marked complete (PILOT_RESUME_DIR, PILOT_RESUME_STEP)."""
    return os.environ.get("PILOT_STAGE") == "run"


def checkpoint_step() -> int | None:
    """The step after which to save a checkpoint (PILOT_CHECKPOINT_STEP), or None; in a bound
    run, the steps between checkpoints."""
    return env_int("PILOT_CHECKPOINT_STEP")


def checkpoint_due(step: int) -> bool:
    """True when a complete checkpoint is due after optimizer step ``step``: step K in a pilot,
    every multiple of it in a bound run."""
    k = checkpoint_step()
    if k is None or k <= 0:
        return False
    return int(step) % k == 0 if bound() else int(step) == k


def resume_step() -> int | None:
    """The step of the checkpoint in PILOT_RESUME_DIR: PILOT_RESUME_STEP (a requeued bound run:
    the newest complete one), else PILOT_CHECKPOINT_STEP (a pilot's resumed process: K)."""
    step = env_int("PILOT_RESUME_STEP")
    return step if step is not None else checkpoint_step()


def checkpoint_dir() -> str | None:
    """Where to save the checkpoint (PILOT_CHECKPOINT_DIR; may not exist yet), or None."""
    return os.environ.get("PILOT_CHECKPOINT_DIR") or None


def resume_dir() -> str | None:
    """The checkpoint to restore from (PILOT_RESUME_DIR), or None."""
    if active():
        watch()
    return os.environ.get("PILOT_RESUME_DIR") or None


def stage() -> str | None:
    """"single" or "node" (PILOT_STAGE), "run" in a bound run, or None outside both."""
    return os.environ.get("PILOT_STAGE") or None


def process() -> str | None:
    """"reference" or "resumed" (PILOT_PROCESS), "run" in a bound run, or None outside both."""
    return os.environ.get("PILOT_PROCESS") or None
