"""Where a requeued bound run resumes: the newest checkpoint the program marked complete.

In the run a pilot's grant binds (PILOT_STAGE "run"), saved(step) on every
rank, right after the save, marks the checkpoint of ``step`` complete: once
every rank has reached it (a barrier, when torch.distributed runs), rank 0
writes {"schema": "slurm-pilot/resume/1", "step": step} to
PILOT_CHECKPOINT_DIR/pilot-resume.json, beside and renamed into place. When the job is requeued, the supervisor reads that
record (as the user) and starts the program again with PILOT_RESUME_DIR
(the same folder) and PILOT_RESUME_STEP (that step). See pilot-program(7).
"""

from __future__ import annotations

import json
import os
import sys

from slurm_pilot._util import env_int

RESUME_FILE = "pilot-resume.json"
RESUME_SCHEMA = "slurm-pilot/resume/1"


def _barrier() -> None:
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier()


def mark_complete(step: int) -> str | None:
    """Record the checkpoint of ``step`` as the one to resume from; the record's path on rank 0,
    else None. Call it on every rank once its part of the save is written."""
    directory = os.environ.get("PILOT_CHECKPOINT_DIR")
    if not directory:
        return None
    _barrier()  # every rank's files are written before the record names them
    if (env_int("RANK") or 0) != 0:
        return None
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, RESUME_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"schema": RESUME_SCHEMA, "step": int(step)}, f)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path
