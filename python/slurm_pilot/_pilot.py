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


def checkpoint_step() -> int | None:
    """The step after which to save a checkpoint (PILOT_CHECKPOINT_STEP), or None."""
    return env_int("PILOT_CHECKPOINT_STEP")


def checkpoint_due(step: int) -> bool:
    """True when a complete checkpoint is due after optimizer step ``step``."""
    k = checkpoint_step()
    return k is not None and int(step) == k


def checkpoint_dir() -> str | None:
    """Where to save the checkpoint (PILOT_CHECKPOINT_DIR; may not exist yet), or None."""
    return os.environ.get("PILOT_CHECKPOINT_DIR") or None


def resume_dir() -> str | None:
    """The checkpoint to restore from (PILOT_RESUME_DIR), or None."""
    if active():
        watch()
    return os.environ.get("PILOT_RESUME_DIR") or None


def stage() -> str | None:
    """"single" or "node" (PILOT_STAGE), or None outside a pilot."""
    return os.environ.get("PILOT_STAGE") or None


def process() -> str | None:
    """"reference" or "resumed" (PILOT_PROCESS), or None outside a pilot."""
    return os.environ.get("PILOT_PROCESS") or None
