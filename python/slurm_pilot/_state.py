"""The probe's module-level state, all of it in one place: what this
process has opened, counted and seen so far. The other modules hold
functions and constants only, and reach this state through here."""

from __future__ import annotations

import collections
import os
from typing import Any, Callable


class Probe:
    """Per-process state: the open sink, the step counter and cached sizes."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.fd: int | None = None
        self.broken = False
        self.last_step = 0
        self.last_time: float | None = None
        self.model_id: int | None = None
        self.model_sizes: tuple[int, int] | None = None   # (params, param_bytes)
        self.param_dtype: str | None = None
        self.grad_bytes: int | None = None
        self.optim_id: int | None = None
        self.optim_bytes: int | None = None
        self.env_sent = False
        self.free_seen = False   # the device's free memory was read for a step
        self.device_peak: int | None = None  # the highest allocator peak of the steps after the first
        self.rng_first: dict[str, str | None] = {}  # "rng.python"/"rng.numpy": digest when first seen
        # Step records not written yet, in step order (_defer.Record), the device's part of
        # those that wait for it (a _defer.Staging) and the mark of the last record written.
        self.waiting: collections.deque[Any] = collections.deque()
        self.staging: Any = None
        self.last_mark: Any = None


probe: Probe | None = None


def current() -> Probe:
    """This process's Probe: a new one in a fresh process or a forked child."""
    global probe
    if probe is None or probe.pid != os.getpid():  # fresh, or a forked child
        probe = Probe()
    return probe


# _defer.flush_at_exit is registered with atexit (once: a forked child inherits it).
exit_flush_registered = False

# Mixed precision as torch sees it: the last autocast region entered and
# whether an enabled GradScaler scaled a loss, since the previous record.
autocast_seen: tuple[str, str] | None = None   # (dtype name, device type)
scaler_seen = False

# (module, class, method, note) still to wrap, each once its module is
# imported (_watch puts torch's there when it is imported).
hooks_left: list[tuple[str, str, str, Callable[[Any], None]]] = []

# torch was asked for deterministic kernels (training.deterministic).
deterministic_set = False

# The framework integrations' warnings already printed, once each.
warned: set[str] = set()

# The integrations' PilotCallback classes made so far, by the integration's
# module name (each made when its framework is first needed).
callback_classes: dict[str, type] = {}
