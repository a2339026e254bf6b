#!/usr/bin/env python3
"""An independent reader of safetensors files, standard library only.

Checks what any safetensors reader relies on: the 8-byte little-endian
header length, a JSON header whose entries have a known dtype, a shape and
data_offsets, sizes equal to numel * element size, offsets that tile the data
section from 0 to the end of the file, and (for F32 tensors) values that
decode as finite floats.

Usage: read_safetensors.py FILE...   exit 0 when every file is valid, 1 if not.
"""
import json
import math
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
         "I8": 1, "U8": 1, "BOOL": 1}


def check(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        return ["shorter than 8 bytes"]
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        return [f"header length {n} exceeds the file"]
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except ValueError as e:
        return [f"header is not JSON: {e}"]
    problems = []
    meta = header.pop("__metadata__", {})
    if not all(isinstance(v, str) for v in meta.values()):
        problems.append("__metadata__ values must be strings")
    body = data[8 + n:]
    spans = []
    for name, t in header.items():
        dtype, shape, (begin, end) = t["dtype"], t["shape"], t["data_offsets"]
        if dtype not in SIZES:
            problems.append(f"{name}: unknown dtype {dtype}")
            continue
        numel = math.prod(shape) if shape else 1
        if end - begin != numel * SIZES[dtype]:
            problems.append(f"{name}: {end - begin} bytes for {numel} x {dtype}")
        spans.append((begin, end, name))
        if dtype == "F32" and numel:
            values = struct.unpack(f"<{numel}f", body[begin:end])
            if not all(math.isfinite(v) for v in values):
                problems.append(f"{name}: non-finite values")
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin != pos:
            problems.append(f"{name}: starts at {begin}, expected {pos}")
        pos = end
    if pos != len(body):
        problems.append(f"data section is {len(body)} bytes, tensors cover {pos}")
    return problems


def main(paths):
    bad = 0
    for p in paths:
        problems = check(p)
        for q in problems:
            print(f"{p}: {q}")
        bad += bool(problems)
        if not problems:
            print(f"{p}: ok")
    return 1 if bad or not paths else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
