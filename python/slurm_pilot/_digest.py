"""The digest of a value: SHA-256 over a canonical serialization of it, the
same for the same state in any two processes (the fingerprints' digests and
the first states of the random generators)."""

from __future__ import annotations

import collections.abc
import ctypes
import hashlib
import re
import sys
from typing import Any

from slurm_pilot._util import dtype_name

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _feed_tensor(h: Any, t: Any, counter: list[int]) -> None:
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
    h.update(b"t%s%s:%d:" % (dtype_name(t.dtype).encode(), repr(tuple(t.shape)).encode(), n))
    if n:
        h.update((ctypes.c_char * n).from_address(t.data_ptr()))


def _feed(h: Any, value: Any, counter: list[int]) -> None:
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


def digest(value: Any) -> tuple[str, int]:
    """(first 16 hex digits of the SHA-256 of value's serialization, tensors in it)."""
    h = hashlib.sha256()
    counter = [0]
    _feed(h, value, counter)
    return h.hexdigest()[:16], counter[0]
