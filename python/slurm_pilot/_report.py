"""The step record: what step() measures after each optimizer step (_defer writes it)."""

from __future__ import annotations

import os
import resource
import sys
import time
from typing import TYPE_CHECKING, Any

from slurm_pilot import _defer, _state
from slurm_pilot._pilot import active
from slurm_pilot._util import dtype_name, env_int
from slurm_pilot._watch import watch

if TYPE_CHECKING:
    import torch

# Fields the probe itself writes; extra keyword arguments never replace them
# and they are never dropped to make a line fit.
CORE_FIELDS = (
    "step", "loss", "rank", "tokens", "lr", "grad_norm", "eval_loss",
    "data_wait_ms", "step_ms", "seq_len", "micro_batch", "device",
    "peak_allocated_bytes", "peak_reserved_bytes", "device_free_bytes",
    "device_total_bytes", "alloc_retries", "ooms", "peak_rss_bytes",
    "params", "param_bytes", "grad_bytes", "optimizer_state_bytes",
    "param_dtype", "autocast", "autocast_device", "grad_scaler",
    "probe_ms", "dropped",
)


def _tensor_bytes(t: Any) -> int:
    return t.numel() * t.element_size()


def _device_of(loss: Any, model: Any) -> tuple[str, Any]:
    dev = getattr(loss, "device", None)
    if dev is None and model is not None:
        try:
            dev = next(model.parameters()).device
        except StopIteration:
            dev = None
    if dev is None:
        if not os.environ.get("PILOT_DEVICE", "cpu").startswith("cuda"):
            return "cpu", None
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available():
            return "cuda", None
        dev = torch.device("cuda", torch.cuda.current_device())
    return ("cuda", dev) if dev.type == "cuda" else ("cpu", None)


def _peak_rss() -> int:
    # RUSAGE_SELF's high-water mark is at least VmHWM (the kernel takes the
    # larger of the two), without reading /proc on every step.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cuda_fields(p: _state.Probe, torch: Any, dev: Any, n: int, rec: dict[str, Any]) -> None:
    """The allocator's figures of the step: one call for its counters (the
    nested form: memory_stats() and max_memory_allocated() build the flat
    dictionary of every counter each time), then the peaks reset for the
    next step. The driver is asked for the device's free memory only on the
    steps the verdict reads it from: the process's first, the first after
    it, one that raised the highest peak of those after the first, and the
    last (PILOT_STEPS)."""
    stats = torch.cuda.memory_stats_as_nested_dict(dev)
    peak = stats.get("allocated_bytes", {}).get("all", {}).get("peak", 0)
    rec["peak_allocated_bytes"] = peak
    rec["peak_reserved_bytes"] = stats.get("reserved_bytes", {}).get("all", {}).get("peak", 0)
    rec["alloc_retries"] = stats.get("num_alloc_retries", 0)
    rec["ooms"] = stats.get("num_ooms", 0)
    first = not p.free_seen
    if first or p.device_peak is None or peak > p.device_peak or n == env_int("PILOT_STEPS"):
        free, total = torch.cuda.mem_get_info(dev)
        rec["device_free_bytes"] = free
        rec["device_total_bytes"] = total
        p.free_seen = True
    if not first:
        p.device_peak = peak if p.device_peak is None else max(peak, p.device_peak)
    torch.cuda.reset_peak_memory_stats(dev)


def _model_fields(p: _state.Probe, model: Any, rec: dict[str, Any]) -> None:
    if p.model_id != id(model):
        p.model_id = id(model)
        params = list(model.parameters())
        p.model_sizes = (sum(t.numel() for t in params),
                         sum(_tensor_bytes(t) for t in params))
        by_dtype = {}
        for t in params:
            by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + _tensor_bytes(t)
        p.param_dtype = dtype_name(max(by_dtype, key=by_dtype.get)) if by_dtype else None
        p.grad_bytes = None
    rec["params"], rec["param_bytes"] = p.model_sizes
    if p.param_dtype is not None:
        rec["param_dtype"] = p.param_dtype
    if p.grad_bytes is None:
        grads = [t.grad for t in model.parameters() if t.grad is not None]
        if grads:
            p.grad_bytes = sum(_tensor_bytes(g) for g in grads)
    if p.grad_bytes is not None:
        rec["grad_bytes"] = p.grad_bytes


def _optimizer_fields(p: _state.Probe, optimizer: Any, rec: dict[str, Any]) -> None:
    if p.optim_id != id(optimizer):
        p.optim_id = id(optimizer)
        p.optim_bytes = None
    if p.optim_bytes is None and len(optimizer.state) > 0:
        total = 0
        for entry in optimizer.state.values():
            for value in entry.values():
                if hasattr(value, "element_size") and hasattr(value, "numel"):
                    total += _tensor_bytes(value)
        p.optim_bytes = total
    if p.optim_bytes is not None:
        rec["optimizer_state_bytes"] = p.optim_bytes


def _flush_due(n: int) -> bool:
    """True at the steps whose records are written before step() returns, waiting for the
    device: the last (PILOT_STEPS), the checkpoint's K and the step after it."""
    last, k = env_int("PILOT_STEPS"), env_int("PILOT_CHECKPOINT_STEP")
    return (last is not None and n >= last) or (k is not None and k <= n <= k + 1)


def step(loss: torch.Tensor | float, tokens: torch.Tensor | float | None = None, *,
         step: int | None = None, model: torch.nn.Module | None = None,
         optimizer: torch.optim.Optimizer | None = None, lr: torch.Tensor | float | None = None,
         grad_norm: torch.Tensor | float | None = None,
         eval_loss: torch.Tensor | float | None = None, data_wait_ms: float | None = None,
         seq_len: int | None = None, micro_batch: int | None = None,
         **extra: Any) -> dict[str, Any] | None:
    """Report one optimizer step; returns the record (None outside a pilot).

    ``loss`` may be a tensor. ``step`` defaults to the previous step + 1 (the
    first is 1, or restored()+1). ``model`` and ``optimizer`` add their sizes;
    ``lr`` defaults to the optimizer's first group. Extra keyword arguments
    are written as fields of their own.

    Numbers handed as CUDA tensors are not read here: they are copied to host
    memory without waiting for the device and the record is written by a
    later call that finds them arrived (see _defer), or at the last step, at
    the checkpoint's step and the one after it, and at exit. The dictionary
    returned holds the values handed in until then, and the record as written
    from then on.
    """
    if not active():
        return None
    start = time.perf_counter()
    p = _state.current()
    watch()
    device, dev = _device_of(loss, model)
    torch = sys.modules.get("torch")
    n = p.last_step + 1 if step is None else int(step)
    p.last_step = n

    rec = {"step": n, "loss": loss}
    rank = env_int("RANK")
    rec["rank"] = 0 if rank is None else rank
    if lr is None and optimizer is not None and optimizer.param_groups:
        lr = optimizer.param_groups[0].get("lr")
    for key, value in (("tokens", tokens), ("lr", lr), ("grad_norm", grad_norm),
                       ("eval_loss", eval_loss), ("data_wait_ms", data_wait_ms)):
        if value is not None:
            rec[key] = value
    # No synchronize: numbers on the device are copied without waiting for it
    # (_defer). A number read here at once that waits for the device (a
    # tensor of a second device) waits for the step: probe_ms leaves it out.
    record, read = _defer.start(p, rec, extra, dev)
    now = time.perf_counter()
    if p.last_time is not None:
        rec["step_ms"] = (now - p.last_time) * 1e3  # the device's marks replace it (_defer)
    for key, value in (("seq_len", seq_len), ("micro_batch", micro_batch)):
        if value is not None:
            rec[key] = int(value)
    rec["device"] = device
    if dev is not None:
        _cuda_fields(p, torch, dev, n, rec)
    rec["peak_rss_bytes"] = _peak_rss()
    if model is not None:
        _model_fields(p, model, rec)
    if optimizer is not None:
        _optimizer_fields(p, optimizer, rec)
    if _state.autocast_seen is not None:
        rec["autocast"], rec["autocast_device"] = _state.autocast_seen
        _state.autocast_seen = None
    if _state.scaler_seen:
        rec["grad_scaler"] = True
        _state.scaler_seen = False
    others = _defer.poll(p)  # earlier records now complete: their writing is not this call's work
    rec["probe_ms"] = (time.perf_counter() - start - read - others) * 1e3
    _defer.push(p, record, _flush_due(n))
    p.last_time = now
    return record.out
