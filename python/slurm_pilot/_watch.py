"""What the probe watches inside a pilot without being called: torch's
mixed precision (its autocast regions and GradScalers), its deterministic
kernels when the pilot asks for them, and the first states of the random
generators the OS seeds."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

from slurm_pilot import _rng, _state
from slurm_pilot._digest import digest
from slurm_pilot._util import dtype_name, guard


def note_autocast(ctx: Any) -> None:
    if ctx._enabled:
        _state.autocast_seen = (dtype_name(ctx.fast_dtype), str(ctx.device))


def note_scaler(scaler: Any) -> None:
    if scaler.is_enabled():
        _state.scaler_seen = True


def wrap(cls: type, name: str, note: Callable[[Any], None]) -> None:
    """Make cls.name call note(self) after it returns; once, and never an
    error of the program's."""
    original = vars(cls).get(name)
    if original is None or getattr(original, "_slurm_pilot", False):
        return

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            note(self)
        except Exception:
            pass
        return result

    wrapper._slurm_pilot = True
    setattr(cls, name, wrapper)


_state.hooks_left.extend([
    ("torch.amp.autocast_mode", "autocast", "__enter__", note_autocast),
    ("torch.amp.grad_scaler", "GradScaler", "scale", note_scaler),
    ("torch.cuda.amp.grad_scaler", "GradScaler", "scale", note_scaler),
    ("torch.distributed.fsdp.sharded_grad_scaler", "ShardedGradScaler", "scale", note_scaler),
])


def hook_torch() -> None:
    """Watch torch's autocast regions and GradScalers, each class once its
    module is imported.

    torch.autocast, torch.amp.autocast and torch.cuda.amp.autocast all enter
    through torch.amp.autocast_mode.autocast.__enter__; the scalers are
    torch.amp.GradScaler (torch 2.3 on; torch.cuda.amp.GradScaler derives from
    it), torch.cuda.amp.GradScaler before, and FSDP's ShardedGradScaler.
    """
    for hook in list(_state.hooks_left):
        module_name, cls, name, note = hook
        module = sys.modules.get(module_name)
        if module is None:
            continue
        _state.hooks_left.remove(hook)
        try:
            wrap(getattr(module, cls), name, note)
        except Exception:  # torch's internals differ: no field
            pass


def deterministic() -> None:
    """training.deterministic (PILOT_DETERMINISTIC=1): once torch is imported,
    ask it for deterministic kernels, as a program of its own would
    (torch.use_deterministic_algorithms: an operation without a deterministic
    implementation stops the program with torch's error, which the verdict
    names, where only a warning would leave cuDNN's attention backward
    nondeterministic; cuDNN's deterministic choice, no benchmarking), so that
    a resumed process computes what the reference did. The pilot sets
    CUBLAS_WORKSPACE_CONFIG, which cuBLAS reads when CUDA starts."""
    if _state.deterministic_set or os.environ.get("PILOT_DETERMINISTIC") != "1":
        return
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "use_deterministic_algorithms"):
        return
    _state.deterministic_set = True
    guard(lambda: torch.use_deterministic_algorithms(True))
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    if cudnn is not None:
        guard(lambda: setattr(cudnn, "deterministic", True))
        guard(lambda: setattr(cudnn, "benchmark", False))


def watch() -> None:
    """Start watching, inside a pilot: torch's mixed precision once torch is
    imported (and its deterministic kernels when the pilot asks for them), and
    the first states of Python's and numpy's global random generators in this
    process (both are seeded from the OS when a program leaves them alone, so
    their digests differ between any two processes)."""
    p = _state.current()
    if len(p.rng_first) < len(_rng.OS_SEEDED):
        for name, get in _rng.generators():
            if name not in _rng.OS_SEEDED:
                break
            key = "rng." + name
            if key not in p.rng_first:
                p.rng_first[key] = guard(lambda: digest(get())[0])
    hook_torch()
    deterministic()
