"""Where the records go: one JSON line each, under MAX_LINE bytes, written
whole to PILOT_METRICS (the supervisor's Unix socket, else a file)."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from typing import Any

from slurm_pilot._state import Probe

MAX_LINE = 4095  # bytes of one record including its newline (< PIPE_BUF)


def jsonable(value: Any) -> Any:
    """What JSON writes for a value it has no type for: a tensor's or numpy
    value's number or list, else its str()."""
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


def encode(rec: dict[str, Any], extra: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """(line, record): JSON under MAX_LINE bytes; the last extras go first when too long."""
    keys = [k for k in extra if k not in rec]
    while True:
        full = dict(rec)
        for k in keys:
            full[k] = extra[k]
        dropped = len([k for k in extra if k not in rec]) - len(keys)
        if dropped:
            full["dropped"] = dropped
        line = (json.dumps(full, default=jsonable, separators=(",", ":")) + "\n").encode()
        if len(line) <= MAX_LINE or not keys:
            return line, full
        keys.pop()


def open_sink(path: str) -> int:
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


def write(p: Probe, line: bytes) -> None:
    """Write one line to the sink, opened on the first; after an error, one
    line on standard error and no further records."""
    if p.broken:
        return
    try:
        if p.fd is None:
            p.fd = open_sink(os.environ["PILOT_METRICS"])
        written = os.write(p.fd, line)
        while written < len(line):  # only a regular file may take part of a line
            written += os.write(p.fd, line[written:])
    except OSError as e:
        p.broken = True
        print("slurm_pilot: metrics sink %s: %s; no further records"
              % (os.environ.get("PILOT_METRICS"), e), file=sys.stderr, flush=True)
