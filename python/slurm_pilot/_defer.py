"""Step records on their way to the sink: the numbers still on the device
read without waiting for it, every record written in step order.

A step's numbers that step() is handed as CUDA tensors (the loss, tokens,
lr, grad_norm, eval_loss, data_wait_ms, an extra field) are not read at the
call: their copy to pinned host memory is started (non_blocking) and an
event recorded after it on the same stream, and a later call that finds the
event passed (Event.query()) reads the copies and writes the record. The
probe so adds no synchronization to a program that has none of its own.
Every record goes through one queue, in step order, whether it waits for
the device or not: a record is written once it and every record before it
are complete, so a record with nothing on the device, behind none that
waits, is written by its own call, as a CPU program's always was.

The queue is flushed, waiting for the device, at the last step
(PILOT_STEPS), at the checkpoint's step K and the step after it (the
supervisor dates step K's checkpoint files by the arrival of the first
record past K, and times the save between the records of K and K+1), before
a "state" line, when an integration's training ends, and at interpreter exit
(a bounded wait). A process ended by a signal loses the records still
waiting, as it always lost the steps it had not reported.

The device's part (copies, events) is a Staging: CudaStaging on torch.cuda;
the tests drive the queue with one of their own on the CPU.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import time
from typing import Any, Protocol

from slurm_pilot import _env, _sink, _state
from slurm_pilot._util import number

# The probe's own fields that may be handed as tensors.
NUMBERS = ("loss", "tokens", "lr", "grad_norm", "eval_loss", "data_wait_ms")
# Records waiting for the device at most; past it, step() waits for the
# oldest (a program that many steps ahead of its device loses nothing by it).
MAX_WAITING = 16
# How long interpreter exit waits for the device to pass the records' events.
EXIT_WAIT_SECONDS = 60.0
# An extra field's tensor of this many elements or more cannot fit a line:
# it is left out, as its list would have been, and never copied.
MAX_COPY_ELEMENTS = (_sink.MAX_LINE + 1) // 2
TOO_LONG = "x" * _sink.MAX_LINE


class Staging(Protocol):
    """The device's part of a record that waits for it."""

    def wants(self, value: Any) -> bool:
        """True for a value still on the device (a CUDA tensor): copied, not read, at the call."""

    def device(self, value: Any) -> Any:
        """The device ``value`` is on: one record's copies and mark are on one device."""

    def copy(self, value: Any) -> Any:
        """Start copying ``value`` to host memory without waiting; the host copy, to read once
        the mark recorded after it has passed."""

    def mark(self, device: Any) -> Any:
        """A mark on ``device``'s current stream, after the copies started there."""

    def done(self, mark: Any) -> bool:
        """True once the device has passed ``mark``; never waits."""

    def wait(self, mark: Any) -> None:
        """Wait until the device has passed ``mark``."""

    def elapsed_ms(self, earlier: Any, later: Any) -> float:
        """The device's time from one passed mark to a later one, in milliseconds."""

    def release(self, mark: Any | None, copies: list[Any]) -> None:
        """A mark no longer needed and host copies already read, for reuse."""


class CudaStaging:
    """Staging on torch.cuda: pinned host buffers by dtype and shape, and timing events by
    device, each reused once its record is written."""

    def __init__(self) -> None:
        self.buffers: dict[tuple[Any, tuple[int, ...]], list[Any]] = {}
        self.events: dict[Any, list[Any]] = {}

    def wants(self, value: Any) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(value, torch.Tensor) and value.is_cuda

    def device(self, value: Any) -> Any:
        return value.device

    def copy(self, value: Any) -> Any:
        torch = sys.modules["torch"]
        t = value.detach()
        free = self.buffers.get((t.dtype, tuple(t.shape)))
        host = free.pop() if free else torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        host.copy_(t, non_blocking=True)
        return host

    def mark(self, device: Any) -> Any:
        torch = sys.modules["torch"]
        free = self.events.get(device)
        event = free.pop() if free else torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(device))
        return device, event

    def done(self, mark: Any) -> bool:
        return mark[1].query()

    def wait(self, mark: Any) -> None:
        mark[1].synchronize()

    def elapsed_ms(self, earlier: Any, later: Any) -> float:
        return earlier[1].elapsed_time(later[1])

    def release(self, mark: Any | None, copies: list[Any]) -> None:
        if mark is not None:
            self.events.setdefault(mark[0], []).append(mark[1])
        for host in copies:
            self.buffers.setdefault((host.dtype, tuple(host.shape)), []).append(host)


class Record:
    """A step record in the queue: ``rec`` and ``extra`` as encode() takes them, the host
    copies of its device values (key, copy, whether a field of the probe's) and the mark after
    them (None: nothing on the device), the device for the env line, and ``out``, the
    dictionary step() returned, the record as written once it is."""

    __slots__ = ("rec", "extra", "copies", "mark", "dev", "out")

    def __init__(self, rec: dict[str, Any], extra: dict[str, Any],
                 copies: list[tuple[str, Any, bool]], mark: Any, dev: Any) -> None:
        self.rec, self.extra, self.copies, self.mark, self.dev = rec, extra, copies, mark, dev
        self.out: dict[str, Any] = {}


def staging(p: _state.Probe) -> Staging:
    """This process's Staging (CudaStaging unless a test set its own)."""
    if p.staging is None:
        p.staging = CudaStaging()
    return p.staging


def start(p: _state.Probe, rec: dict[str, Any], extra: dict[str, Any],
          dev: Any) -> tuple[Record, float]:
    """(the record, seconds spent reading values at once): the one-element values of NUMBERS
    in ``rec`` and the tensors of ``extra`` that are on the device copied to host without
    waiting, with a mark after them, and held detached until read; the other NUMBERS read now
    (a tensor on a second device too)."""
    s = staging(p)
    copies: list[tuple[str, Any, bool]] = []
    on = None  # the device of the record's copies
    read = 0.0
    for key in NUMBERS:
        value = rec.get(key)
        if value is None:
            continue
        if s.wants(value) and value.numel() == 1 and (on is None or s.device(value) == on):
            on = s.device(value) if on is None else on
            copies.append((key, s.copy(value), True))
            rec[key] = value.detach()  # not the program's autograd graph, kept a step longer
        else:  # what cannot be a number raises here, as it always did
            t = time.perf_counter()
            rec[key] = number(value)
            read += time.perf_counter() - t
    for key, value in extra.items():
        if s.wants(value) and (on is None or s.device(value) == on):
            if value.numel() >= MAX_COPY_ELEMENTS:
                extra[key] = TOO_LONG
                continue
            on = s.device(value) if on is None else on
            copies.append((key, s.copy(value), False))
            extra[key] = value.detach()
    mark = s.mark(on) if copies else None
    return Record(rec, extra, copies, mark, dev), read


def push(p: _state.Probe, r: Record, flush_now: bool) -> None:
    """Queue ``r`` behind the records waiting; write every one when ``flush_now`` (waiting for
    the device), else ``r`` at once when nothing waits before it and nothing of it is on the
    device."""
    p.waiting.append(r)
    if r.mark is not None and not _state.exit_flush_registered:
        _state.exit_flush_registered = True
        atexit.register(flush_at_exit)
    if flush_now or (r.mark is None and len(p.waiting) == 1):
        flush(p)
    if p.waiting and p.waiting[-1] is r:  # until it is written: the values handed in
        r.out.update(r.rec)
        r.out.update((k, v) for k, v in r.extra.items() if k not in r.rec)


def poll(p: _state.Probe) -> float:
    """Write the records at the head of the queue whose device values have arrived, without
    waiting; past MAX_WAITING records, wait for the oldest. Returns the seconds spent writing
    lines and waiting, which are not the probe's own work. A device error stops it, never
    raised here: the program's own next call on the device raises it."""
    spent = 0.0
    try:
        while p.waiting:
            r = p.waiting[0]
            if r.mark is not None and not p.staging.done(r.mark):
                if len(p.waiting) < MAX_WAITING:
                    break
                t = time.perf_counter()
                p.staging.wait(r.mark)
                spent += time.perf_counter() - t
            p.waiting.popleft()
            spent += _write(p, r)
    except Exception:
        pass
    return spent


def flush(p: _state.Probe, deadline: float | None = None) -> None:
    """Write every record waiting, in step order, waiting for the device as needed: until
    ``deadline`` (time.monotonic()) when given, leaving the rest, else as long as it takes."""
    while p.waiting:
        r = p.waiting[0]
        if r.mark is not None and not p.staging.done(r.mark):
            if deadline is None:
                p.staging.wait(r.mark)
            else:
                while not p.staging.done(r.mark):
                    if time.monotonic() >= deadline:
                        return
                    time.sleep(0.001)
        p.waiting.popleft()
        _write(p, r)


def flush_current() -> None:
    """flush() of this process's records, never an error: where an integration's training ends
    and before a "state" line."""
    p = _state.probe
    if p is None or p.pid != os.getpid() or not p.waiting:
        return
    try:
        flush(p)
    except Exception:
        pass


def flush_at_exit() -> None:
    """At interpreter exit: the records still waiting, for at most EXIT_WAIT_SECONDS."""
    p = _state.probe
    if p is None or p.pid != os.getpid() or not p.waiting:
        return
    try:
        flush(p, time.monotonic() + EXIT_WAIT_SECONDS)
    except Exception:
        pass


def _complete(p: _state.Probe, r: Record) -> None:
    """The record's values from their host copies, and its step time from the device's marks
    when the record before it had one too (the wall clock's stays otherwise)."""
    rec = r.rec
    for key, host, core in r.copies:
        if core:
            rec[key] = number(host)
        else:
            r.extra[key] = _sink.jsonable(host)  # what the line would have made of the tensor
    if r.mark is not None and p.last_mark is not None and "step_ms" in rec:
        try:
            rec["step_ms"] = p.staging.elapsed_ms(p.last_mark, r.mark)
        except Exception:  # marks on two devices
            pass
    for key in ("tokens", "seq_len", "micro_batch"):
        if isinstance(rec.get(key), float) and math.isfinite(rec[key]):
            rec[key] = int(rec[key])


def _write(p: _state.Probe, r: Record) -> float:
    """Complete and write one record (the env line before a process's first, its packages
    lines after it) and hand its buffers back; returns the seconds spent encoding and writing."""
    _complete(p, r)
    t = time.perf_counter()
    line, written = _sink.encode(r.rec, r.extra)
    if not p.env_sent:  # once per process, before its first record
        p.env_sent = True
        torch = sys.modules.get("torch")
        _sink.write(p, _sink.encode(_env.env_record(torch, r.dev, r.rec["rank"]), {})[0])
        _sink.write(p, line)
        for packages in _env.packages_lines(r.rec["rank"]):
            _sink.write(p, packages)
    else:
        _sink.write(p, line)
    spent = time.perf_counter() - t
    r.out.clear()
    r.out.update(written)
    if p.last_mark is not None or r.copies:
        p.staging.release(p.last_mark, [host for _, host, _ in r.copies])
    p.last_mark = r.mark
    return spent
