"""The lines a process writes once, around its first record: "env" (the
versions and the device it runs with) and "packages" (the installed
distributions and the native extensions it loaded)."""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from typing import Any

from slurm_pilot._sink import MAX_LINE
from slurm_pilot._util import guard

MAX_DISTRIBUTIONS = 4000  # installed distributions reported, at most
MAX_EXTENSIONS = 200      # loaded native modules reported, at most
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}\Z")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]{0,63}\Z")


def env_record(torch: Any, dev: Any, rank: int) -> dict[str, Any]:
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
    nccl = guard(lambda: torch.cuda.nccl.version())
    if isinstance(nccl, (tuple, list)):
        nccl = ".".join(str(v) for v in nccl)
    rec["nccl"] = None if nccl is None else str(nccl)
    cudnn = guard(lambda: torch.backends.cudnn.version())
    rec["cudnn"] = None if cudnn is None else str(cudnn)
    rec["gpu_count"] = guard(torch.cuda.device_count) or 0
    if dev is not None and guard(torch.cuda.is_initialized):
        rec["gpu"] = guard(lambda: torch.cuda.get_device_name(dev))
        capability = guard(lambda: torch.cuda.get_device_capability(dev))
        if capability is not None:
            rec["gpu_capability"] = "%d.%d" % tuple(capability)
    return rec


def distributions() -> dict[str, str]:
    """{name: version} of the installed distributions this interpreter sees
    (importlib.metadata), names and versions that read as such only."""
    import importlib.metadata as metadata
    found = {}
    for dist in metadata.distributions():
        name = guard(lambda: dist.metadata["Name"])
        version = guard(lambda: dist.version)
        if (isinstance(name, str) and isinstance(version, str) and _NAME.match(name)
                and _VERSION.match(version) and name not in found):
            found[name] = version
            if len(found) >= MAX_DISTRIBUTIONS:
                break
    return found


def extensions(distributions: dict[str, str]) -> dict[str, str]:
    """{top-level module: "distribution version", or "" when no installed
    distribution provides it (built by the program or its cache)} of the
    modules with native code loaded now, outside the standard library and
    torch."""
    import importlib.metadata as metadata
    import sysconfig
    stdlib = tuple(os.path.realpath(p) + os.sep for p in {
        sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")} if p)
    owners = guard(metadata.packages_distributions) or {}
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


def packages_lines(rank: int) -> list[bytes]:
    """The "packages" lines: the installed distributions, in as many lines
    under MAX_LINE bytes as they need, the first also holding the loaded
    native extensions."""
    installed = guard(distributions) or {}
    loaded = guard(lambda: extensions(installed)) or {}
    lines, names = [], sorted(installed)
    part = {}
    head = {"kind": "packages", "rank": rank, "extensions": loaded}

    def line(chunk):
        rec = dict(head, distributions=chunk)
        return (json.dumps(rec, separators=(",", ":")) + "\n").encode()

    while True:  # a first line too long for its extensions keeps as many as fit
        if len(line({})) <= MAX_LINE or not head["extensions"]:
            break
        head["extensions"] = dict(list(head["extensions"].items())[:len(head["extensions"]) // 2])
    for name in names:
        part[name] = installed[name]
        if len(line(part)) > MAX_LINE:
            del part[name]
            lines.append(line(part))
            head = {"kind": "packages", "rank": rank}
            part = {name: installed[name]}
    lines.append(line(part))
    return lines
