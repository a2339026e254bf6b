"""The slurm-pilot probe: what a training program reports to its pilot.

Call ``slurm_pilot.step(loss, ...)`` once after each optimizer step. Inside a
pilot (``PILOT_METRICS`` set) it writes one JSON line per call to the pilot's
metrics sink; outside a pilot every function is a cheap no-op, so the same
program runs unchanged. See pilot-program(7).
"""

import json
import math
import os
import resource
import socket
import stat
import sys
import time

__all__ = [
    "active", "steps", "checkpoint_step", "checkpoint_due", "checkpoint_dir",
    "resume_dir", "stage", "process", "restored", "step",
]

MAX_LINE = 4095  # bytes of one record including its newline (< PIPE_BUF)

# Fields the probe itself writes; extra keyword arguments never replace them
# and they are never dropped to make a line fit.
CORE_FIELDS = (
    "step", "loss", "rank", "tokens", "lr", "grad_norm", "eval_loss",
    "data_wait_ms", "step_ms", "seq_len", "micro_batch", "device",
    "peak_allocated_bytes", "peak_reserved_bytes", "device_free_bytes",
    "device_total_bytes", "alloc_retries", "ooms", "peak_rss_bytes",
    "params", "param_bytes", "grad_bytes", "optimizer_state_bytes",
    "probe_ms", "dropped",
)


def _env_int(name):
    value = os.environ.get(name, "")
    try:
        return int(value)
    except ValueError:
        return None


def active():
    """True inside a pilot: PILOT_METRICS names the metrics sink."""
    return bool(os.environ.get("PILOT_METRICS"))


def steps():
    """The number of optimizer steps to run (PILOT_STEPS), or None."""
    return _env_int("PILOT_STEPS")


def checkpoint_step():
    """The step after which to save a checkpoint (PILOT_CHECKPOINT_STEP), or None."""
    return _env_int("PILOT_CHECKPOINT_STEP")


def checkpoint_due(step):
    """True when a complete checkpoint is due after optimizer step ``step``."""
    k = checkpoint_step()
    return k is not None and int(step) == k


def checkpoint_dir():
    """Where to save the checkpoint (PILOT_CHECKPOINT_DIR; may not exist yet), or None."""
    return os.environ.get("PILOT_CHECKPOINT_DIR") or None


def resume_dir():
    """The checkpoint to restore from (PILOT_RESUME_DIR), or None."""
    return os.environ.get("PILOT_RESUME_DIR") or None


def stage():
    """"single" or "node" (PILOT_STAGE), or None outside a pilot."""
    return os.environ.get("PILOT_STAGE") or None


def process():
    """"reference" or "resumed" (PILOT_PROCESS), or None outside a pilot."""
    return os.environ.get("PILOT_PROCESS") or None


class _Probe:
    """Per-process state: the open sink, the step counter and cached sizes."""

    def __init__(self):
        self.pid = os.getpid()
        self.fd = None
        self.broken = False
        self.last_step = 0
        self.last_time = None
        self.model_id = None
        self.model_sizes = None   # (params, param_bytes)
        self.grad_bytes = None
        self.optim_id = None
        self.optim_bytes = None


_probe = None


def _state():
    global _probe
    if _probe is None or _probe.pid != os.getpid():  # fresh, or a forked child
        _probe = _Probe()
    return _probe


def restored(step):
    """Tell the probe the checkpoint held step ``step``: the next record is step+1."""
    _state().last_step = int(step)


def _number(value):
    """A tensor or number as a Python number (a one-element tensor via .item())."""
    if value is None:
        return None
    item = getattr(value, "item", None)
    if item is not None:
        value = item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return float(value)


def _jsonable(value):
    item = getattr(value, "item", None)
    if item is not None:
        try:
            return item()
        except (RuntimeError, ValueError):
            pass
    tolist = getattr(value, "tolist", None)
    if tolist is not None:
        return tolist()
    return str(value)


def _tensor_bytes(t):
    return t.numel() * t.element_size()


def _device_of(loss, model):
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


def _peak_rss():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
                    break
    except OSError:
        pass
    return peak


def _cuda_fields(torch, dev, rec):
    rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
    rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
    free, total = torch.cuda.mem_get_info(dev)
    rec["device_free_bytes"] = free
    rec["device_total_bytes"] = total
    stats = torch.cuda.memory_stats(dev)
    rec["alloc_retries"] = stats.get("num_alloc_retries", 0)
    rec["ooms"] = stats.get("num_ooms", 0)
    torch.cuda.reset_peak_memory_stats(dev)


def _model_fields(p, model, rec):
    if p.model_id != id(model):
        p.model_id = id(model)
        params = list(model.parameters())
        p.model_sizes = (sum(t.numel() for t in params),
                         sum(_tensor_bytes(t) for t in params))
        p.grad_bytes = None
    rec["params"], rec["param_bytes"] = p.model_sizes
    if p.grad_bytes is None:
        grads = [t.grad for t in model.parameters() if t.grad is not None]
        if grads:
            p.grad_bytes = sum(_tensor_bytes(g) for g in grads)
    if p.grad_bytes is not None:
        rec["grad_bytes"] = p.grad_bytes


def _optimizer_fields(p, optimizer, rec):
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


def _encode(rec, extra):
    """(line, record): JSON under MAX_LINE bytes; the last extras go first when too long."""
    keys = [k for k in extra if k not in rec]
    while True:
        full = dict(rec)
        for k in keys:
            full[k] = extra[k]
        dropped = len([k for k in extra if k not in rec]) - len(keys)
        if dropped:
            full["dropped"] = dropped
        line = (json.dumps(full, default=_jsonable, separators=(",", ":")) + "\n").encode()
        if len(line) <= MAX_LINE or not keys:
            return line, full
        keys.pop()


def _open_sink(path):
    """A descriptor for the sink: the supervisor's Unix socket (connected:
    it reads only processes of the pilot), else a file opened to append."""
    try:
        is_socket = stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        is_socket = False
    if not is_socket:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        s.close()
        raise
    return s.detach()


def _write(p, line):
    if p.broken:
        return
    try:
        if p.fd is None:
            p.fd = _open_sink(os.environ["PILOT_METRICS"])
        written = os.write(p.fd, line)
        while written < len(line):  # only a regular file may take part of a line
            written += os.write(p.fd, line[written:])
    except OSError as e:
        p.broken = True
        print("slurm_pilot: metrics sink %s: %s; no further records"
              % (os.environ.get("PILOT_METRICS"), e), file=sys.stderr, flush=True)


def step(loss, tokens=None, *, step=None, model=None, optimizer=None, lr=None,
         grad_norm=None, eval_loss=None, data_wait_ms=None, seq_len=None,
         micro_batch=None, **extra):
    """Report one optimizer step; returns the record written (None outside a pilot).

    ``loss`` may be a tensor. ``step`` defaults to the previous step + 1 (the
    first is 1, or restored()+1). ``model`` and ``optimizer`` add their sizes;
    ``lr`` defaults to the optimizer's first group. Extra keyword arguments
    are written as fields of their own.
    """
    if not active():
        return None
    now = time.perf_counter()
    p = _state()
    device, dev = _device_of(loss, model)
    torch = sys.modules.get("torch")
    if dev is not None:
        torch.cuda.synchronize(dev)
    n = p.last_step + 1 if step is None else int(step)
    p.last_step = n

    rec = {"step": n, "loss": _number(loss)}
    rank = _env_int("RANK")
    rec["rank"] = 0 if rank is None else rank
    if lr is None and optimizer is not None and optimizer.param_groups:
        lr = optimizer.param_groups[0].get("lr")
    for key, value in (("tokens", tokens), ("lr", lr), ("grad_norm", grad_norm),
                       ("eval_loss", eval_loss), ("data_wait_ms", data_wait_ms)):
        if value is not None:
            rec[key] = _number(value)
    if p.last_time is not None:
        rec["step_ms"] = (now - p.last_time) * 1e3
    for key, value in (("seq_len", seq_len), ("micro_batch", micro_batch)):
        if value is not None:
            rec[key] = int(value)
    rec["device"] = device
    if dev is not None:
        _cuda_fields(torch, dev, rec)
    rec["peak_rss_bytes"] = _peak_rss()
    if model is not None:
        _model_fields(p, model, rec)
    if optimizer is not None:
        _optimizer_fields(p, optimizer, rec)
    for key in ("tokens", "seq_len", "micro_batch"):
        if isinstance(rec.get(key), float) and math.isfinite(rec[key]):
            rec[key] = int(rec[key])
    done = time.perf_counter()
    rec["probe_ms"] = (done - now) * 1e3
    line, written = _encode(rec, extra)
    _write(p, line)
    p.last_time = now
    return written
