"""The slurm-pilot probe: what a training program reports to its pilot.

Call ``slurm_pilot.step(loss, ...)`` once after each optimizer step, and
``saved(step, ...)`` / ``restored(step, ...)`` around the checkpoint. Inside a
pilot (``PILOT_METRICS`` set) each writes one JSON line to the pilot's
metrics sink: a step record, or an object with a "kind" ("env" once per
process, "state" for the fingerprints of a save or a restore); outside a
pilot every function is a cheap no-op, so the same program runs unchanged.
See pilot-program(7).
"""

import collections.abc
import ctypes
import functools
import hashlib
import json
import math
import os
import platform
import random
import re
import resource
import socket
import stat
import sys
import time

__all__ = [
    "active", "steps", "checkpoint_step", "checkpoint_due", "checkpoint_dir",
    "resume_dir", "stage", "process", "saved", "restored", "step",
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
    "param_dtype", "autocast", "autocast_device", "grad_scaler",
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
    if active():
        _watch()
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
    if active():
        _watch()
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
        self.param_dtype = None
        self.grad_bytes = None
        self.optim_id = None
        self.optim_bytes = None
        self.env_sent = False
        self.free_seen = False   # the device's free memory was read for a step
        self.device_peak = None  # the highest allocator peak of the steps after the first
        self.rng_first = {}  # "rng.python"/"rng.numpy": digest when first seen


_probe = None


def _state():
    global _probe
    if _probe is None or _probe.pid != os.getpid():  # fresh, or a forked child
        _probe = _Probe()
    return _probe


# Mixed precision as torch sees it: the last autocast region entered and
# whether an enabled GradScaler scaled a loss, since the previous record.
_autocast_seen = None   # (dtype name, device type)
_scaler_seen = False


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _note_autocast(ctx):
    global _autocast_seen
    if ctx._enabled:
        _autocast_seen = (_dtype_name(ctx.fast_dtype), str(ctx.device))


def _note_scaler(scaler):
    global _scaler_seen
    if scaler.is_enabled():
        _scaler_seen = True


def _wrap(cls, name, note):
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


# (module, class, method, note) still to wrap, each once its module is imported
_hooks_left = [
    ("torch.amp.autocast_mode", "autocast", "__enter__", _note_autocast),
    ("torch.amp.grad_scaler", "GradScaler", "scale", _note_scaler),
    ("torch.cuda.amp.grad_scaler", "GradScaler", "scale", _note_scaler),
    ("torch.distributed.fsdp.sharded_grad_scaler", "ShardedGradScaler", "scale", _note_scaler),
]


def _hook_torch():
    """Watch torch's autocast regions and GradScalers, each class once its
    module is imported.

    torch.autocast, torch.amp.autocast and torch.cuda.amp.autocast all enter
    through torch.amp.autocast_mode.autocast.__enter__; the scalers are
    torch.amp.GradScaler (torch 2.3 on; torch.cuda.amp.GradScaler derives from
    it), torch.cuda.amp.GradScaler before, and FSDP's ShardedGradScaler.
    """
    for hook in list(_hooks_left):
        module_name, cls, name, note = hook
        module = sys.modules.get(module_name)
        if module is None:
            continue
        _hooks_left.remove(hook)
        try:
            _wrap(getattr(module, cls), name, note)
        except Exception:  # torch's internals differ: no field
            pass


_deterministic_set = False


def _deterministic():
    """training.deterministic (PILOT_DETERMINISTIC=1): once torch is imported,
    ask it for deterministic kernels, as a program of its own would
    (torch.use_deterministic_algorithms: an operation without a deterministic
    implementation stops the program with torch's error, which the verdict
    names, where only a warning would leave cuDNN's attention backward
    nondeterministic; cuDNN's deterministic choice, no benchmarking), so that
    a resumed process computes what the reference did. The pilot sets
    CUBLAS_WORKSPACE_CONFIG, which cuBLAS reads when CUDA starts."""
    global _deterministic_set
    if _deterministic_set or os.environ.get("PILOT_DETERMINISTIC") != "1":
        return
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "use_deterministic_algorithms"):
        return
    _deterministic_set = True
    _guard(lambda: torch.use_deterministic_algorithms(True))
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    if cudnn is not None:
        _guard(lambda: setattr(cudnn, "deterministic", True))
        _guard(lambda: setattr(cudnn, "benchmark", False))


def _watch():
    """Start watching, inside a pilot: torch's mixed precision once torch is
    imported (and its deterministic kernels when the pilot asks for them), and
    the first states of Python's and numpy's global random generators in this
    process (both are seeded from the OS when a program leaves them alone, so
    their digests differ between any two processes)."""
    p = _state()
    if "rng.python" not in p.rng_first:
        p.rng_first["rng.python"] = _guard(lambda: _digest(random.getstate())[0])
    if "rng.numpy" not in p.rng_first and "numpy" in sys.modules:
        p.rng_first["rng.numpy"] = _guard(
            lambda: _digest(sys.modules["numpy"].random.get_state())[0])
    _hook_torch()
    _deterministic()


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
    # RUSAGE_SELF's high-water mark is at least VmHWM (the kernel takes the
    # larger of the two), without reading /proc on every step.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cuda_fields(p, torch, dev, n, rec):
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
    if first or p.device_peak is None or peak > p.device_peak or n == _env_int("PILOT_STEPS"):
        free, total = torch.cuda.mem_get_info(dev)
        rec["device_free_bytes"] = free
        rec["device_total_bytes"] = total
        p.free_seen = True
    if not first:
        p.device_peak = peak if p.device_peak is None else max(peak, p.device_peak)
    torch.cuda.reset_peak_memory_stats(dev)


def _model_fields(p, model, rec):
    if p.model_id != id(model):
        p.model_id = id(model)
        params = list(model.parameters())
        p.model_sizes = (sum(t.numel() for t in params),
                         sum(_tensor_bytes(t) for t in params))
        by_dtype = {}
        for t in params:
            by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + _tensor_bytes(t)
        p.param_dtype = _dtype_name(max(by_dtype, key=by_dtype.get)) if by_dtype else None
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


def _guard(f):
    try:
        return f()
    except Exception:
        return None


def _env_record(torch, dev, rank):
    """The "env" line: the versions and the device this process runs with."""
    rec = {"kind": "env", "rank": rank, "python": platform.python_version(), "torch": None,
           "cuda": None, "hip": None, "nccl": None, "cudnn": None, "gpu": None,
           "gpu_capability": None, "gpu_count": 0}
    if torch is None:
        return rec
    rec["torch"] = str(torch.__version__)
    version = getattr(torch, "version", None)
    for key in ("cuda", "hip"):
        value = getattr(version, key, None)
        rec[key] = None if value is None else str(value)
    nccl = _guard(lambda: torch.cuda.nccl.version())
    if isinstance(nccl, (tuple, list)):
        nccl = ".".join(str(v) for v in nccl)
    rec["nccl"] = None if nccl is None else str(nccl)
    cudnn = _guard(lambda: torch.backends.cudnn.version())
    rec["cudnn"] = None if cudnn is None else str(cudnn)
    rec["gpu_count"] = _guard(torch.cuda.device_count) or 0
    if dev is not None and _guard(torch.cuda.is_initialized):
        rec["gpu"] = _guard(lambda: torch.cuda.get_device_name(dev))
        capability = _guard(lambda: torch.cuda.get_device_capability(dev))
        if capability is not None:
            rec["gpu_capability"] = "%d.%d" % tuple(capability)
    return rec


MAX_DISTRIBUTIONS = 4000  # installed distributions reported, at most
MAX_EXTENSIONS = 200      # loaded native modules reported, at most
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}\Z")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]{0,63}\Z")


def _distributions():
    """{name: version} of the installed distributions this interpreter sees
    (importlib.metadata), names and versions that read as such only."""
    import importlib.metadata as metadata
    found = {}
    for dist in metadata.distributions():
        name = _guard(lambda: dist.metadata["Name"])
        version = _guard(lambda: dist.version)
        if (isinstance(name, str) and isinstance(version, str) and _NAME.match(name)
                and _VERSION.match(version) and name not in found):
            found[name] = version
            if len(found) >= MAX_DISTRIBUTIONS:
                break
    return found


def _extensions(distributions):
    """{top-level module: "distribution version", or "" when no installed
    distribution provides it (built by the program or its cache)} of the
    modules with native code loaded now, outside the standard library and
    torch."""
    import importlib.metadata as metadata
    import sysconfig
    stdlib = tuple(os.path.realpath(p) + os.sep for p in {
        sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")} if p)
    owners = _guard(metadata.packages_distributions) or {}
    found = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith((".so", ".pyd")):
            continue
        top = name.split(".")[0]
        if top == "torch" or top in found or not _NAME.match(top):
            continue
        if "lib-dynload" in path or os.path.realpath(path).startswith(stdlib):
            continue
        dist = next((d for d in owners.get(top, []) if d in distributions), None)
        found[top] = "%s %s" % (dist, distributions[dist]) if dist else ""
        if len(found) >= MAX_EXTENSIONS:
            break
    return found


def _packages_lines(rank):
    """The "packages" lines: the installed distributions, in as many lines
    under MAX_LINE bytes as they need, the first also holding the loaded
    native extensions."""
    distributions = _guard(_distributions) or {}
    extensions = _guard(lambda: _extensions(distributions)) or {}
    lines, names = [], sorted(distributions)
    part = {}
    head = {"kind": "packages", "rank": rank, "extensions": extensions}

    def line(chunk):
        rec = dict(head, distributions=chunk)
        return (json.dumps(rec, separators=(",", ":")) + "\n").encode()

    while True:  # a first line too long for its extensions keeps as many as fit
        if len(line({})) <= MAX_LINE or not head["extensions"]:
            break
        head["extensions"] = dict(list(head["extensions"].items())[:len(head["extensions"]) // 2])
    for name in names:
        part[name] = distributions[name]
        if len(line(part)) > MAX_LINE:
            del part[name]
            lines.append(line(part))
            head = {"kind": "packages", "rank": rank}
            part = {name: distributions[name]}
    lines.append(line(part))
    return lines


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


# Fingerprints of the training state at a save and at a restore: a digest per
# component, over a canonical serialization of its state.

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _feed_tensor(h, t, counter):
    to_local = getattr(t, "to_local", None)  # DTensor: this rank's part
    if callable(to_local):
        t = to_local()
    shards = getattr(t, "local_shards", None)  # ShardedTensor: this rank's shards
    if callable(shards):
        h.update(b"S")
        for shard in shards():
            _feed(h, list(shard.metadata.shard_offsets), counter)
            _feed_tensor(h, shard.tensor, counter)
        return
    counter[0] += 1
    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")  # one tensor at a time in host memory
    for name in ("resolve_conj", "resolve_neg"):
        resolve = getattr(t, name, None)
        if resolve is not None:
            t = resolve()
    t = t.contiguous()
    n = t.numel() * t.element_size()
    h.update(b"t%s%s:%d:" % (_dtype_name(t.dtype).encode(), repr(tuple(t.shape)).encode(), n))
    if n:
        h.update((ctypes.c_char * n).from_address(t.data_ptr()))


def _feed(h, value, counter):
    """Feed a canonical serialization of ``value`` to ``h``: dicts sorted by key,
    lists and tuples in order, tensors by dtype, shape and bytes, numbers by
    repr, other objects by repr without addresses. counter[0] counts tensors."""
    torch = sys.modules.get("torch")
    if value is None:
        h.update(b"N;")
    elif isinstance(value, bool):
        h.update(b"T;" if value else b"F;")
    elif isinstance(value, int):
        h.update(b"i%d;" % value)
    elif isinstance(value, float):
        h.update(b"f%s;" % float.__repr__(value).encode())
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        h.update(b"s%d:" % len(data))
        h.update(data)
    elif isinstance(value, (bytes, bytearray)):
        h.update(b"y%d:" % len(value))
        h.update(value)
    elif torch is not None and isinstance(value, torch.Tensor):
        _feed_tensor(h, value, counter)
    elif isinstance(value, collections.abc.Mapping):
        try:
            keys = sorted(value)
        except TypeError:
            keys = sorted(value, key=repr)
        h.update(b"d%d:" % len(keys))
        for k in keys:
            _feed(h, k, counter)
            _feed(h, value[k], counter)
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        h.update(b"l%d:" % len(items))
        for v in items:
            _feed(h, v, counter)
    elif all(hasattr(value, a) for a in ("tobytes", "dtype", "shape")):  # numpy
        data = value.tobytes()
        h.update(b"a%s%s:%d:" % (str(value.dtype).encode(), repr(tuple(value.shape)).encode(),
                                 len(data)))
        h.update(data)
    else:
        data = _ADDRESS.sub("", repr(value)).encode("utf-8", "surrogatepass")
        h.update(b"r%d:" % len(data))
        h.update(data)


def _digest(value):
    """(first 16 hex digits of the SHA-256 of value's serialization, tensors in it)."""
    h = hashlib.sha256()
    counter = [0]
    _feed(h, value, counter)
    return h.hexdigest()[:16], counter[0]


def _plain(value):
    tolist = getattr(value, "tolist", None)  # a tensor or a numpy value
    if tolist is None:
        raise TypeError("%s is not JSON-able" % type(value).__name__)
    return tolist()


def _value_component(value):
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain)
    return {"digest": hashlib.sha256(text.encode()).hexdigest()[:16], "value": text[:100]}


def _state_component(state, tensors=False, **details):
    """{"digest": ...} of ``state``, with the count of its tensors when asked
    and each detail that is not None."""
    digest, count = _digest(state)
    out = {"digest": digest}
    if tensors:
        out["tensors"] = count
    out.update((k, v) for k, v in details.items() if v is not None)
    return out


def _detail(state, key, convert):
    value = state.get(key) if isinstance(state, collections.abc.Mapping) else None
    return None if value is None else convert(value)


def _hyper_component(groups):
    groups = [{k: v for k, v in g.items() if k != "params"} for g in groups]
    return _state_component(groups, lr=_detail(groups[0], "lr", _number) if groups else None)


def _scheduler_component(scheduler):
    state = scheduler.state_dict()
    return _state_component(state, last_epoch=_detail(state, "last_epoch", int))


def _scaler_component(scaler):
    state = scaler.state_dict()
    return _state_component(state, scale=_detail(state, "scale", _number))


def _rng_component(p, name, state):
    """A generator's digest; "untouched" when neither seeded nor drawn from
    since the probe first saw it in this process."""
    out = _state_component(state)
    if p.rng_first.get(name) == out["digest"]:
        out["untouched"] = True
    return out


def _other_component(value):
    if callable(getattr(value, "state_dict", None)):
        out = _state_component(value.state_dict(), tensors=True)
        if not out["tensors"]:
            del out["tensors"]
        return out
    return _value_component(value)


def _components(p, model, optimizer, scheduler, scaler, data_position, other):
    """[(name, function computing the component)], in the order of the line."""
    torch = sys.modules.get("torch")
    parts = []
    if model is not None:
        parts.append(("model", lambda: _state_component(model.state_dict(), tensors=True)))
    if optimizer is not None:
        memo = []  # one state_dict() for both components

        def optimizer_state():
            if not memo:
                memo.append(optimizer.state_dict())
            return memo[0]

        parts.append(("optimizer",
                      lambda: _state_component(optimizer_state()["state"], tensors=True)))
        parts.append(("optimizer.hyper",
                      lambda: _hyper_component(optimizer_state()["param_groups"])))
    if scheduler is not None:
        parts.append(("scheduler", lambda: _scheduler_component(scheduler)))
    if scaler is not None:
        parts.append(("scaler", lambda: _scaler_component(scaler)))
    parts.append(("rng.python", lambda: _rng_component(p, "rng.python", random.getstate())))
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        parts.append(("rng.numpy",
                      lambda: _rng_component(p, "rng.numpy", numpy.random.get_state())))
    if torch is not None:
        parts.append(("rng.torch", lambda: _state_component(torch.get_rng_state())))
        if _guard(torch.cuda.is_initialized):
            parts.append(("rng.cuda", lambda: _state_component(torch.cuda.get_rng_state_all())))
    if data_position is not None:
        parts.append(("data", lambda: _value_component(data_position)))
    for name, value in other.items():
        parts.append((name, lambda value=value: _other_component(value)))
    return parts


def _encode_state(head, components):
    """The state line under MAX_LINE bytes: details go first (the last
    component's first), then whole components from the end ("dropped")."""
    comps = dict(components)
    names = list(comps)

    def encode(dropped):
        rec = dict(head, components=comps)
        if dropped:
            rec["dropped"] = dropped
        return (json.dumps(rec, default=_jsonable, separators=(",", ":")) + "\n").encode()

    line = encode(0)
    for name in reversed(names):
        if len(line) <= MAX_LINE:
            return line
        comps[name] = {k: v for k, v in comps[name].items() if k in ("digest", "error")}
        line = encode(0)
    dropped = 0
    while len(line) > MAX_LINE and names:
        del comps[names.pop()]
        dropped += 1
        line = encode(dropped)
    return line


def _fingerprint(when, step, model, optimizer, scheduler, scaler, data_position, other):
    p = _state()
    _watch()
    components = {}
    for name, compute in _components(p, model, optimizer, scheduler, scaler, data_position,
                                     other):
        try:
            components[name] = compute()
        except Exception as e:  # this component only; never the program's error
            components[name] = {"error": ("%s: %s" % (type(e).__name__, e))[:80]}
    rank = _env_int("RANK")
    head = {"kind": "state", "when": when, "step": int(step), "rank": 0 if rank is None else rank}
    _write(p, _encode_state(head, components))
    return components


def saved(step, *, model=None, optimizer=None, scheduler=None, scaler=None, data_position=None,
          **other):
    """Fingerprint the checkpoint of optimizer step ``step``, just saved.

    Call it right after the save, on every rank. Inside a pilot it writes one
    "state" line with a digest per component: the model's and the optimizer's
    state dicts, the optimizer's hyperparameters, the scheduler's and the
    scaler's state dicts, the random generators (Python's, numpy's, torch's,
    CUDA's), ``data_position`` (a JSON-able value) and each further keyword
    argument (an object with state_dict(), or a JSON-able value). It returns
    the components as a dictionary. Outside a pilot it does nothing and
    returns None.
    """
    if not active():
        return None
    return _fingerprint("saved", step, model, optimizer, scheduler, scaler, data_position, other)


def restored(step, *, model=None, optimizer=None, scheduler=None, scaler=None,
             data_position=None, **other):
    """Tell the probe the checkpoint held step ``step``: the next record is step+1.

    Call it right after the restore. Inside a pilot it also fingerprints the
    state restored, as saved() does, and returns the components; outside a
    pilot it only sets the step and returns None.
    """
    _state().last_step = int(step)
    if not active():
        return None
    return _fingerprint("restored", step, model, optimizer, scheduler, scaler, data_position,
                        other)


def step(loss, tokens=None, *, step=None, model=None, optimizer=None, lr=None,
         grad_norm=None, eval_loss=None, data_wait_ms=None, seq_len=None,
         micro_batch=None, **extra):
    """Report one optimizer step; returns the record written (None outside a pilot).

    ``loss`` may be a tensor. ``step`` defaults to the previous step + 1 (the
    first is 1, or restored()+1). ``model`` and ``optimizer`` add their sizes;
    ``lr`` defaults to the optimizer's first group. Extra keyword arguments
    are written as fields of their own.
    """
    global _autocast_seen, _scaler_seen
    if not active():
        return None
    start = time.perf_counter()
    p = _state()
    _watch()
    device, dev = _device_of(loss, model)
    torch = sys.modules.get("torch")
    # No synchronize: a loss the program turned into a number has waited for
    # the step already, and a tensor waits for it here, once. That wait is
    # the step's, not the probe's: probe_ms leaves it out.
    before = time.perf_counter()
    loss_value = _number(loss)
    now = time.perf_counter()
    n = p.last_step + 1 if step is None else int(step)
    p.last_step = n

    rec = {"step": n, "loss": loss_value}
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
        _cuda_fields(p, torch, dev, n, rec)
    rec["peak_rss_bytes"] = _peak_rss()
    if model is not None:
        _model_fields(p, model, rec)
    if optimizer is not None:
        _optimizer_fields(p, optimizer, rec)
    if _autocast_seen is not None:
        rec["autocast"], rec["autocast_device"] = _autocast_seen
        _autocast_seen = None
    if _scaler_seen:
        rec["grad_scaler"] = True
        _scaler_seen = False
    for key in ("tokens", "seq_len", "micro_batch"):
        if isinstance(rec.get(key), float) and math.isfinite(rec[key]):
            rec[key] = int(rec[key])
    done = time.perf_counter()
    rec["probe_ms"] = (done - now + before - start) * 1e3
    line, written = _encode(rec, extra)
    if not p.env_sent:  # once per process, before its first record
        p.env_sent = True
        _write(p, _encode(_env_record(torch, dev, rec["rank"]), {})[0])
        _write(p, line)
        for packages in _packages_lines(rec["rank"]):
            _write(p, packages)
    else:
        _write(p, line)
    p.last_time = now
    return written


if active():  # torch imported first: watch its mixed precision from now on
    _watch()
