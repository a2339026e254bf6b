"""The random generators a training step may draw from, in one list: the
fingerprints of a save and a restore digest each (rng.<name>), the probe
notes the first states of those the OS seeds, and slurm_pilot.loop saves and
restores them all."""

from __future__ import annotations

import random
import sys
from typing import Any, Callable, Iterator

from slurm_pilot._util import guard

# Seeded from the OS when a program leaves them alone (their states differ
# between any two processes), and first in generators(); torch seeds its
# own with a constant.
OS_SEEDED = ("python", "numpy")


def generators() -> Iterator[tuple[str, Callable[[], Any]]]:
    """(name, a function reading its state) of each generator this process
    has now, in order: "python" (Python's global generator); "numpy"
    (numpy's global one) once the program imported numpy; "torch" (torch's
    CPU generator) once it imported torch; "cuda" (every CUDA device's, a
    list) once the process initialized CUDA. A state is read only when its
    function is called."""
    yield "python", random.getstate
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        yield "numpy", lambda: numpy.random.get_state()
    torch = sys.modules.get("torch")
    if torch is not None:
        yield "torch", lambda: torch.get_rng_state()
        if guard(torch.cuda.is_initialized):
            yield "cuda", lambda: torch.cuda.get_rng_state_all()


def state() -> dict[str, Any]:
    """The state of every generator of generators(), by name."""
    return {name: get() for name, get in generators()}


def set_state(saved: dict[str, Any]) -> None:
    """Set the generators to ``saved`` (what state() returned in the process
    that saved it): Python's, numpy's where both processes have numpy,
    torch's, and the CUDA devices' where both have CUDA (set when CUDA starts
    where it has not yet)."""
    python = saved["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in saved:
        numpy.random.set_state(saved["numpy"])
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_rng_state(saved["torch"].cpu())
        if "cuda" in saved and torch.cuda.is_available():
            cuda = saved["cuda"]
            if isinstance(cuda, (list, tuple)):
                for device, state in enumerate(cuda[:torch.cuda.device_count()]):
                    torch.cuda.set_rng_state(state.cpu(), device)
            else:  # an earlier probe's checkpoint: the current device's alone
                torch.cuda.set_rng_state(cuda.cpu())
