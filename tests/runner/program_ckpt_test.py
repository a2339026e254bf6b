#!/usr/bin/env python3
"""`pilot-runner verify --program-checkpoint` on checkpoints a program could
save (label `runner`): fixtures are written at test time by Python's torch
(TORCH_PYTHON, the interpreter that has it), the runner reads them without it.

Usage: program_ckpt_test.py RUNNER TORCH_PYTHON WORK_DIR TEST_NAME
Without torch in TORCH_PYTHON the test is skipped (exit 77).
"""
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile

RUNNER, TORCH_PY, WORK, NAME = sys.argv[1:5]

# What a training program saves; run by TORCH_PYTHON with the file name.
SAVE_FULL = r"""
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
m(torch.randn(3, 4)).sum().backward()
opt.step()
sched.step()
state = {"model": m.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
         "step": 4, "rng": torch.get_rng_state(), "note": "x", "lr": 1e-3, "flags": [True, None, (1, 2.5)]}
kind = sys.argv[2]
if kind == "model-only":
    state = {"model": m.state_dict(), "step": 4}
legacy = kind == "legacy"
torch.save(state, sys.argv[1], _use_new_zipfile_serialization=not legacy)
"""


def require(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def fresh(name):
    d = os.path.join(WORK, "program", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def save(path, kind="full"):
    p = subprocess.run([TORCH_PY, "-c", SAVE_FULL, path, kind], capture_output=True, text=True, timeout=300)
    require(p.returncode == 0, f"torch.save fixture: {p.stderr}")


def write_safetensors(path, tensors, truncate=0):
    """tensors: name -> (dtype, shape, bytes). Written by hand: header, data."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    blob = struct.pack("<Q", len(h)) + h + data
    with open(path, "wb") as f:
        f.write(blob[:len(blob) - truncate] if truncate else blob)


def verify(d, expect, *extra):
    p = subprocess.run([RUNNER, "verify", "--program-checkpoint", d, "--json", *extra],
                       capture_output=True, text=True, errors="replace", timeout=300)
    if p.returncode != expect:
        sys.exit(f"FAIL: verify {d}: exit {p.returncode}, expected {expect}\n"
                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return json.loads(p.stdout), p.stderr


def by_path(rep):
    return {f["path"]: f for f in rep["files"]}


def test_torch_full():
    d = fresh("torch_full")
    save(os.path.join(d, "ckpt.pt"))
    rep, _ = verify(d, 0)
    require(rep["mode"] == "program" and rep["ran"] and rep["format"] == "torch", f"format: {rep}")
    f = by_path(rep)["ckpt.pt"]
    require(f["readable"] and f["format"] == "torch" and len(f["sha256"]) == 64, f"file: {f}")
    # 4 parameters, AdamW's exp_avg, exp_avg_sq and step for each, the RNG state.
    require(rep["tensors"] == 17 and f["tensors"] == 17, f"tensors: {rep['tensors']}")
    require(rep["optimizer_state"], "optimizer state found")
    require(f["size"] == os.path.getsize(os.path.join(d, "ckpt.pt")), "size")
    require(rep["problems"] == [] and rep["not_readable"] == [], "no problems")


def test_torch_model_only():
    d = fresh("torch_model_only")
    save(os.path.join(d, "model.pt"), "model-only")
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"step": 4}, f)
    rep, _ = verify(d, 0)
    require(rep["tensors"] == 4 and not rep["optimizer_state"], f"model only: {rep}")
    require(by_path(rep)["meta.json"]["format"] == "metadata", "json is metadata")


def test_safetensors():
    d = fresh("safetensors")
    write_safetensors(os.path.join(d, "model.safetensors"), {
        "w": ("F32", [2, 3], struct.pack("<6f", *range(6))),
        "b": ("BF16", [3], b"\0" * 6),
        "n": ("I64", [0], b"")})
    rep, _ = verify(d, 0)
    f = by_path(rep)["model.safetensors"]
    require(rep["format"] == "safetensors" and f["readable"] and f["tensors"] == 3, f"safetensors: {f}")


def test_safetensors_truncated():
    d = fresh("safetensors_truncated")
    write_safetensors(os.path.join(d, "model.bin"), {"w": ("F32", [4, 4], b"\1" * 64)}, truncate=10)
    rep, err = verify(d, 1)
    f = by_path(rep)["model.bin"]
    require(f["format"] == "safetensors" and not f["readable"], f"detected by contents: {f}")
    require("truncated" in f["detail"] and "model.bin" in rep["problems"][0], f"detail: {rep['problems']}")
    require("pilot: verify: read: FAILED: model.bin:" in err, f"message: {err}")


def test_torch_corrupt():
    d = fresh("torch_corrupt")
    path = os.path.join(d, "ckpt.pt")
    save(path)
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    # One byte of a tensor's data: the zip's structure is intact, its CRC-32 is not.
    with zipfile.ZipFile(path) as z:
        info = [i for i in z.infolist() if i.filename.endswith("/data/0")][0]
    n, e = struct.unpack("<HH", blob[info.header_offset + 26:info.header_offset + 30])
    blob[info.header_offset + 30 + n + e + 3] ^= 0xFF
    with open(path, "wb") as f:
        f.write(blob)
    rep, _ = verify(d, 1)
    f = by_path(rep)["ckpt.pt"]
    require(f["format"] == "torch" and not f["readable"] and "CRC-32" in f["detail"], f"flipped byte: {f}")
    # A truncated archive: no central directory.
    with open(path, "wb") as f:
        f.write(blob[: len(blob) // 2])
    rep, _ = verify(d, 1)
    f = by_path(rep)["ckpt.pt"]
    require(f["format"] == "torch" and not f["readable"], f"truncated zip: {f}")


def test_legacy():
    d = fresh("legacy")
    save(os.path.join(d, "old.pt"), "legacy")
    save(os.path.join(d, "new.pt"))
    rep, err = verify(d, 0)
    f = by_path(rep)["old.pt"]
    require(f["format"] == "torch-legacy" and not f["readable"], f"legacy: {f}")
    require(rep["not_readable"] == ["old.pt"] and "warning" in err, f"a warning: {rep['not_readable']}")


def test_unknown_class():
    d = fresh("unknown_class")
    code = ("import sys, torch, collections\n"
            "class Cfg:\n    pass\n"
            "import numpy\n"
            "torch.save({'cfg': Cfg(), 'w': torch.ones(2), 'np_rng': numpy.random.get_state()}, sys.argv[1])\n")
    p = subprocess.run([TORCH_PY, "-c", code, os.path.join(d, "ckpt.pt")], capture_output=True, text=True)
    require(p.returncode == 0, p.stderr)
    rep, _ = verify(d, 0)
    f = by_path(rep)["ckpt.pt"]
    # A program's own class (a config dataclass) is read as its name and
    # state, never constructed: the tensors beside it count all the same.
    require(f["readable"] and f["tensors"] == 1, f"read: {f}")
    require("objects not constructed: __main__.Cfg" in f["detail"], f"class named: {f}")
    require("numpy" in f["detail"], f"NumPy's arrays (a saved RNG state) kept as objects: {f}")
    require(rep["not_readable"] == [], "nothing unreadable")


def test_symlink():
    d = fresh("symlink")
    save(os.path.join(d, "ckpt.pt"))
    os.symlink("/etc/passwd", os.path.join(d, "link"))
    os.makedirs(os.path.join(d, "sub"))
    os.symlink("..", os.path.join(d, "sub", "up"))
    os.mkfifo(os.path.join(d, "fifo"))
    rep, _ = verify(d, 1)
    files = by_path(rep)
    require(files["link"]["format"] == "symlink" and files["sub/up"]["format"] == "symlink", "links listed")
    require(files["fifo"]["format"] == "special", "fifo listed, not opened")
    require(any(p.startswith("link:") for p in rep["problems"]), f"problem: {rep['problems']}")
    # The directory itself reached through a link is refused.
    os.symlink(d, os.path.join(WORK, "program", "via-link"))
    try:
        verify(os.path.join(WORK, "program", "via-link"), 2)
    finally:
        os.unlink(os.path.join(WORK, "program", "via-link"))


def test_dcp():
    """A torch.distributed.checkpoint directory: .metadata pickled by Python
    (the classes of torch.distributed.checkpoint, built here where torch has
    no such module) and its shards."""
    d = fresh("dcp")
    code = r'''
import sys, os, pickle, types, dataclasses, torch
root = sys.argv[1]
mods = {}
for name in ("torch.distributed.checkpoint", "torch.distributed.checkpoint.metadata",
             "torch.distributed.checkpoint.filesystem"):
    mods[name] = types.ModuleType(name); sys.modules[name] = mods[name]
def cls(mod, name, fields, frozen=False):
    c = dataclasses.make_dataclass(name, fields, frozen=frozen); c.__module__ = mod; c.__qualname__ = name
    setattr(mods[mod], name, c); return c
M = "torch.distributed.checkpoint.metadata"
Chunk = cls(M, "ChunkStorageMetadata", ["offsets", "sizes"])
Props = cls(M, "TensorProperties", ["dtype", "layout", "requires_grad", "memory_format", "pin_memory"])
TSM = cls(M, "TensorStorageMetadata", ["properties", "size", "chunks"])
BSM = cls(M, "BytesStorageMetadata", [])
Index = cls(M, "MetadataIndex", ["fqn", "offset", "index"], frozen=True)
Meta = cls(M, "Metadata", ["state_dict_metadata", "planner_data", "storage_data"])
Info = cls("torch.distributed.checkpoint.filesystem", "_StorageInfo", ["relative_path", "offset", "length"])
tensors = {"model.w": torch.ones(4, 4), "optim.state.model.w.exp_avg": torch.zeros(4, 4)}
sdm, storage = {}, {}
with open(os.path.join(root, "__0_0.distcp"), "wb") as f:
    for fqn, t in tensors.items():
        raw = t.numpy().tobytes(); off = f.tell(); f.write(raw)
        p = Props(torch.float32, torch.strided, False, torch.contiguous_format, False)
        sdm[fqn] = TSM(p, torch.Size(t.shape), [Chunk(torch.Size([0, 0]), torch.Size(t.shape))])
        storage[Index(fqn, torch.Size([0, 0]), 0)] = Info("__0_0.distcp", off, len(raw))
with open(os.path.join(root, "__1_0.distcp"), "wb") as f:
    f.write(b"\0" * 16)
sdm["step"] = BSM()
storage[Index("step", None, None)] = Info("__1_0.distcp", 0, 16)
with open(os.path.join(root, ".metadata"), "wb") as f:
    pickle.dump(Meta(sdm, None, storage), f)
'''
    p = subprocess.run([TORCH_PY, "-c", code, d], capture_output=True, text=True)
    require(p.returncode == 0, p.stderr)
    rep, _ = verify(d, 0)
    files = by_path(rep)
    require(rep["format"] == "dcp" and rep["shards"] == 2, f"dcp: {rep['format']} {rep['shards']}")
    require(files[".metadata"]["readable"] and rep["tensors"] == 2, f"metadata: {files['.metadata']}")
    require(rep["optimizer_state"], "optimizer state named in the metadata")
    require(files["__0_0.distcp"]["readable"], "shard readable")
    # A shard shorter than the ranges .metadata names.
    with open(os.path.join(d, "__0_0.distcp"), "r+b") as f:
        f.truncate(70)
    rep, _ = verify(d, 1)
    require(not by_path(rep)[".metadata"]["readable"], "short shard found")
    # An empty shard of a .metadata that cannot be read: still a failure.
    with open(os.path.join(d, ".metadata"), "wb") as f:
        f.write(b"not a pickle")
    open(os.path.join(d, "__1_0.distcp"), "wb").close()
    rep, _ = verify(d, 1)
    files = by_path(rep)
    require(".metadata" in rep["not_readable"] and any(p.startswith("__1_0.distcp") for p in rep["problems"]),
            f"empty shard: {rep['problems']}")


def test_manifest():
    d = fresh("manifest")
    save(os.path.join(d, "ckpt.pt"))
    os.makedirs(os.path.join(d, "extra"))
    with open(os.path.join(d, "extra", "notes.txt"), "w") as f:
        f.write("step 4\n")
    manifest = os.path.join(WORK, "program", "manifest.json")
    _, _ = verify(d, 0, "--out", manifest)
    rep, _ = verify(d, 0, "--expect-manifest", manifest)
    require(rep["manifest_ok"] and rep["manifest_detail"] == "", f"unchanged: {rep['manifest_detail']}")
    # One byte changed, same size.
    path = os.path.join(d, "extra", "notes.txt")
    with open(path, "r+b") as f:
        f.seek(5)
        f.write(b"5")
    with open(os.path.join(d, "new.txt"), "w") as f:
        f.write("x")
    rep, err = verify(d, 1, "--expect-manifest", manifest)
    require(not rep["manifest_ok"] and rep["manifest_detail"].startswith("extra/notes.txt: sha256"),
            f"mismatch named: {rep['manifest_detail']}")
    require(rep["manifest_extra"] == ["new.txt"], f"extra noted: {rep['manifest_extra']}")
    require("pilot: verify: manifest: FAILED: extra/notes.txt:" in err, err)
    # A file added after the listing is named, never read: a sparse file of
    # 1 TiB costs no time and no hash.
    big = os.path.join(d, "huge.bin")
    with open(big, "wb") as f:
        f.truncate(1 << 40)
    rep, _ = verify(d, 1, "--expect-manifest", manifest)
    os.unlink(big)
    huge = by_path(rep)["huge.bin"]
    require(huge["sha256"] == "" and "not in the manifest" in huge["detail"], str(huge))
    require("huge.bin" in rep["manifest_extra"], f"extra noted: {rep['manifest_extra']}")
    # A file of another size is not hashed; a file gone is named.
    with open(path, "ab") as f:
        f.write(b"more")
    os.unlink(os.path.join(d, "ckpt.pt"))
    rep, _ = verify(d, 1, "--expect-manifest", manifest)
    problems = "\n".join(rep["problems"])
    require("ckpt.pt: missing" in problems and "not read" in by_path(rep)["extra/notes.txt"]["detail"], problems)


def test_empty_and_usage():
    d = fresh("empty")
    rep, _ = verify(d, 1)
    require(rep["format"] == "none" and rep["problems"], "no files fails")
    verify(os.path.join(WORK, "program", "nowhere"), 2)
    p = subprocess.run([RUNNER, "verify", "--program-checkpoint", d, "--config", "x.toml"], capture_output=True)
    require(p.returncode == 2, "--config with --program-checkpoint")
    p = subprocess.run([RUNNER, "verify", "--expect-manifest", "m.json"], capture_output=True)
    require(p.returncode == 2, "--expect-manifest alone")
    bad = os.path.join(WORK, "program", "bad-manifest.json")
    with open(bad, "w") as f:
        f.write("{}")
    verify(d, 2, "--expect-manifest", bad)


def test_hostile():
    """Deep trees, many small hostile files: refused or read, never a crash."""
    d = fresh("hostile")
    deep = d
    for i in range(20):
        deep = os.path.join(deep, "d")
    os.makedirs(deep)
    with open(os.path.join(deep, "x"), "w") as f:
        f.write("x")
    # A zip whose first entry says torch, with garbage after it.
    with open(os.path.join(d, "fake.pt"), "wb") as f:
        f.write(b"PK\x03\x04" + b"\0" * 22 + struct.pack("<HH", 13, 0) + b"arch/data.pkl" + os.urandom(200))
    # A safetensors header describing a huge tensor.
    write_safetensors(os.path.join(d, "huge.safetensors"), {"w": ("F32", [2**40, 2**40], b"")})
    # data.pkl with an endless nesting and a memo loop, in a real torch zip.
    code = ("import sys, torch\n"
            "l = []\nl.append(l)\n"
            "x = [];\nfor _ in range(300): x = [x]\n"
            "torch.save({'loop': l, 'deep': x}, sys.argv[1])\n")
    p = subprocess.run([TORCH_PY, "-c", code, os.path.join(d, "loop.pt")], capture_output=True, text=True)
    require(p.returncode == 0, p.stderr)
    rep, _ = verify(d, 1)
    files = by_path(rep)
    require(not files["fake.pt"]["readable"] and not files["huge.safetensors"]["readable"], "hostile files fail")
    require(any("deeper than 16" in p for p in rep["problems"]), f"depth limit: {rep['problems']}")
    require(files["loop.pt"]["readable"], f"loop.pt: {files['loop.pt']}")


def test_fuzz():
    """Damaged data.pkl records (CRC-32 recomputed, so the pickle itself is
    read) and damaged safetensors headers: each file is read or refused,
    the runner never crashes."""
    import random
    rnd = random.Random(4)
    d = fresh("fuzz")
    src = os.path.join(WORK, "program", "fuzz-source.pt")
    save(src)
    with zipfile.ZipFile(src) as z:
        records = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    for k in range(300):
        out = []
        for name, data in records:
            if name.endswith("/data.pkl"):
                b = bytearray(data)
                for _ in range(rnd.randint(1, 4)):
                    if rnd.random() < 0.2:
                        b = b[: rnd.randrange(len(b))]
                    elif b:
                        b[rnd.randrange(len(b))] = rnd.randrange(256)
                data = bytes(b)
            out.append((name, data))
        with zipfile.ZipFile(os.path.join(d, f"f{k}.pt"), "w", zipfile.ZIP_STORED) as z:
            for name, data in out:
                z.writestr(name, data)
    for k in range(100):
        h = bytearray(json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode())
        h[rnd.randrange(len(h))] = rnd.randrange(256)
        with open(os.path.join(d, f"s{k}.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"\0" * 16)
    # A file name that is not UTF-8 has one spelling in the report.
    with open(os.path.join(d.encode(), b"bad-\xff-name\n.txt"), "w") as f:
        f.write("x")
    p = subprocess.run([RUNNER, "verify", "--program-checkpoint", d, "--json"], capture_output=True, timeout=300)
    require(p.returncode in (0, 1), f"exit {p.returncode}: {p.stderr[-2000:]!r}")
    rep = json.loads(p.stdout.decode("utf-8"))  # strict: the report is valid UTF-8
    require(len(rep["files"]) == 401 and rep["ran"], "every file reported")
    require("bad-\\xff-name\\x0a.txt" in by_path(rep), "escaped name")


TESTS = {n[5:]: f for n, f in globals().items() if n.startswith("test_")}

if __name__ == "__main__":
    if subprocess.run([TORCH_PY, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"SKIP: {TORCH_PY} has no torch")
        sys.exit(77)
    os.makedirs(os.path.join(WORK, "program"), exist_ok=True)
    TESTS[NAME]()
    print(f"ok: {NAME}")
