"""The slurm_pilot probe and the test programs of program mode, for real.

Run from the source root with the python directory on PYTHONPATH:
    PYTHONPATH=python python3 -m unittest -v tests.program.test_probe
or as a script (exits 77, the skip code, when torch is not importable).
"""

import io
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import torch
except ImportError:
    torch = None
if torch is None:
    if __name__ == "__main__":
        print("torch is not importable: skipped")
        sys.exit(77)
    raise unittest.SkipTest("torch is not importable")

import slurm_pilot  # noqa: E402
from slurm_pilot import _defer, _digest, _env, _sink, _state, _watch  # noqa: E402

sys.path.insert(0, HERE)
from fake_staging import FakeStaging  # noqa: E402

STEPS, CKPT = 8, 4
PILOT_VARS = ("PILOT_METRICS", "PILOT_STEPS", "PILOT_CHECKPOINT_STEP", "PILOT_CHECKPOINT_DIR",
              "PILOT_RESUME_DIR", "PILOT_STAGE", "PILOT_PROCESS", "PILOT_DEVICE", "PILOT_SEED",
              "PILOT_SEQ_LEN", "PILOT_MICRO_BATCH", "RANK", "LOCAL_RANK", "WORLD_SIZE",
              "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        return [json.loads(line) for line in f.read().splitlines()]


def read_records(path, kind=None):
    """The step records of a sink (kind None), or its lines of that "kind"."""
    return [r for r in read_lines(path) if r.get("kind") == kind]


def fresh_probe():
    """Forget the probe's open sink and counters, as a new process would."""
    p = _state.probe
    if p is not None and p.fd is not None:
        os.close(p.fd)
    _state.probe = None
    _state.autocast_seen = None
    _state.scaler_seen = False


class ProbeCase(unittest.TestCase):
    """A pilot's environment around each test, the probe fresh as in a new process."""

    def setUp(self):
        # The "packages" lines after a process's first record are
        # test_probe_packages.py's; here a sink holds env, records and states.
        self.packages_lines = _env.packages_lines
        _env.packages_lines = lambda rank: []
        self.saved = {k: os.environ.pop(k) for k in PILOT_VARS if k in os.environ}
        self.dir = tempfile.mkdtemp(prefix="probe-")
        self.sink = os.path.join(self.dir, "metrics.jsonl")
        fresh_probe()

    def tearDown(self):
        _env.packages_lines = self.packages_lines
        fresh_probe()
        for k in PILOT_VARS:
            os.environ.pop(k, None)
        os.environ.update(self.saved)
        shutil.rmtree(self.dir)

    def pilot(self, **env):
        os.environ["PILOT_METRICS"] = self.sink
        os.environ.update({k: str(v) for k, v in env.items()})

    def model_step(self):
        torch.manual_seed(0)
        model = torch.nn.Linear(10, 5)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        loss = model(torch.randn(3, 10)).square().mean()
        loss.backward()
        opt.step()
        return model, opt, loss


class ProbeTest(ProbeCase):
    def test_no_op_outside_a_pilot(self):
        self.assertFalse(slurm_pilot.active())
        self.assertIsNone(slurm_pilot.step(1.0, tokens=10))
        self.assertIsNone(slurm_pilot.steps())
        self.assertIsNone(slurm_pilot.checkpoint_step())
        self.assertFalse(slurm_pilot.checkpoint_due(4))
        self.assertIsNone(slurm_pilot.checkpoint_dir())
        self.assertIsNone(slurm_pilot.resume_dir())
        self.assertIsNone(slurm_pilot.stage())
        self.assertIsNone(slurm_pilot.process())
        slurm_pilot.restored(3)
        self.assertEqual(os.listdir(self.dir), [])

    def test_environment(self):
        self.pilot(PILOT_STEPS=8, PILOT_CHECKPOINT_STEP=4, PILOT_CHECKPOINT_DIR="/c",
                   PILOT_RESUME_DIR="/r", PILOT_STAGE="node", PILOT_PROCESS="resumed")
        self.assertTrue(slurm_pilot.active())
        self.assertEqual(slurm_pilot.steps(), 8)
        self.assertEqual(slurm_pilot.checkpoint_step(), 4)
        self.assertTrue(slurm_pilot.checkpoint_due(4))
        self.assertFalse(slurm_pilot.checkpoint_due(5))
        self.assertEqual(slurm_pilot.checkpoint_dir(), "/c")
        self.assertEqual(slurm_pilot.resume_dir(), "/r")
        self.assertEqual(slurm_pilot.stage(), "node")
        self.assertEqual(slurm_pilot.process(), "resumed")

    def test_record_on_cpu(self):
        self.pilot(RANK=3)
        model, opt, loss = self.model_step()
        slurm_pilot.step(loss, tokens=30, model=model, optimizer=opt, seq_len=3, micro_batch=1,
                         grad_norm=torch.tensor(0.5), data_wait_ms=1.5)
        slurm_pilot.step(loss.item(), 30, model=model, optimizer=opt)
        first, second = read_records(self.sink)
        self.assertEqual(first["step"], 1)
        self.assertEqual(second["step"], 2)
        self.assertEqual(first["loss"], loss.item())
        self.assertEqual(first["rank"], 3)
        self.assertEqual(first["tokens"], 30)
        self.assertEqual((first["seq_len"], first["micro_batch"]), (3, 1))
        self.assertEqual(first["lr"], 1e-3)
        self.assertEqual(first["grad_norm"], 0.5)
        self.assertEqual(first["data_wait_ms"], 1.5)
        self.assertEqual(first["device"], "cpu")
        self.assertGreater(first["peak_rss_bytes"], 0)
        self.assertNotIn("peak_allocated_bytes", first)
        self.assertEqual(first["params"], 10 * 5 + 5)
        self.assertEqual(first["param_bytes"], 55 * 4)
        self.assertEqual(first["grad_bytes"], 55 * 4)
        # AdamW: exp_avg and exp_avg_sq per parameter, plus each parameter's step tensor
        step_bytes = sum(s["step"].numel() * s["step"].element_size()
                         for s in opt.state.values() if torch.is_tensor(s["step"]))
        self.assertEqual(first["optimizer_state_bytes"], 2 * 55 * 4 + step_bytes)
        self.assertGreaterEqual(first["probe_ms"], 0)
        self.assertNotIn("step_ms", first)
        self.assertGreater(second["step_ms"], 0)

    def test_record_on_cuda(self):
        """The CUDA path, with the allocator's calls replaced: no synchronize, the
        allocator's counters read once a step and its peaks reset; the driver asked
        for free memory on the first and second steps, on a step whose peak exceeds
        those after the first, and on the last; and the env line of a process on an
        H200."""
        self.pilot(RANK=1, PILOT_STEPS="6")
        calls = []
        peaks = iter([900, 1000, 1000, 1200, 1100, 1100])

        def nested(dev=None):
            calls.append("stats")
            return {"allocated_bytes": {"all": {"peak": next(peaks), "current": 1}},
                    "reserved_bytes": {"all": {"peak": 2000}},
                    "num_alloc_retries": 5, "num_ooms": 6}

        def flat(dev=None):
            raise AssertionError("the flat dictionary is built on every call")

        fake = [(torch.cuda, {
            "synchronize": lambda dev=None: calls.append("sync"),
            "max_memory_allocated": flat,
            "max_memory_reserved": flat,
            "memory_stats": flat,
            "memory_stats_as_nested_dict": nested,
            "mem_get_info": lambda dev=None: calls.append("free") or (3000, 4000),
            "reset_peak_memory_stats": lambda dev=None: calls.append("reset"),
            "is_initialized": lambda: True,
            "device_count": lambda: 8,
            "get_device_name": lambda dev=None: "NVIDIA H200" if dev.index == 1 else "other",
            "get_device_capability": lambda dev=None: (9, 0),
        }), (torch.cuda.nccl, {"version": lambda: (2, 21, 5)}),
            (torch.backends.cudnn, {"version": lambda: 90100}),
            (torch.version, {"cuda": "12.4"})]
        saved = [(mod, {name: getattr(mod, name) for name in f}) for mod, f in fake]

        class Loss:
            device = torch.device("cuda", 1)

            def item(self):
                return 2.5

        for mod, f in fake:
            for name, value in f.items():
                setattr(mod, name, value)
        try:
            for _ in range(6):
                slurm_pilot.step(Loss(), tokens=8)
        finally:
            for mod, f in saved:
                for name, value in f.items():
                    setattr(mod, name, value)
        self.assertNotIn("sync", calls)
        self.assertEqual(calls.count("stats"), 6)
        self.assertEqual(calls.count("reset"), 6)
        env, = read_records(self.sink, "env")
        self.assertEqual(env, {"kind": "env", "rank": 1, "python": platform.python_version(),
                               "torch": str(torch.__version__), "cuda": "12.4",
                               "hip": torch.version.hip, "nccl": "2.21.5", "cudnn": "90100",
                               "gpu": "NVIDIA H200", "gpu_capability": "9.0", "gpu_count": 8})
        recs = read_records(self.sink)
        self.assertEqual([r["step"] for r in recs if "device_free_bytes" in r], [1, 2, 4, 6])
        self.assertEqual(calls.count("free"), 4)
        rec = recs[0]
        self.assertEqual(rec["device"], "cuda")
        self.assertEqual(rec["loss"], 2.5)
        self.assertEqual((rec["peak_allocated_bytes"], rec["peak_reserved_bytes"]), (900, 2000))
        self.assertEqual([r["peak_allocated_bytes"] for r in recs], [900, 1000, 1000, 1200, 1100, 1100])
        self.assertEqual((rec["device_free_bytes"], rec["device_total_bytes"]), (3000, 4000))
        self.assertEqual((rec["alloc_retries"], rec["ooms"]), (5, 6))
        self.assertGreater(rec["peak_rss_bytes"], 0)
        self.assertEqual(calls[:3], ["stats", "free", "reset"])

    def test_optimizer_state_counted_once(self):
        self.pilot()
        model, opt, loss = self.model_step()
        slurm_pilot.step(loss, model=model, optimizer=opt)
        opt.state[model.weight]["extra"] = torch.zeros(1000)  # not looked at again
        slurm_pilot.step(loss, model=model, optimizer=opt)
        a, b = read_records(self.sink)
        self.assertEqual(a["optimizer_state_bytes"], b["optimizer_state_bytes"])

    def test_empty_optimizer_state_is_left_out(self):
        self.pilot()
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.AdamW(model.parameters(), lr=0.25)
        slurm_pilot.step(1.0, model=model, optimizer=opt)
        rec, = read_records(self.sink)
        self.assertNotIn("optimizer_state_bytes", rec)
        self.assertNotIn("grad_bytes", rec)
        self.assertEqual(rec["lr"], 0.25)

    def test_one_write_per_record(self):
        self.pilot()
        writes = []
        real = os.write

        def counting(fd, data):
            writes.append(bytes(data))
            return real(fd, data)

        _sink.os.write = counting
        try:
            for i in range(3):
                slurm_pilot.step(float(i), tokens=4, extra_field="x")
        finally:
            _sink.os.write = real
        self.assertEqual(len(writes), 4)  # the env line, then one per step
        for w in writes:
            self.assertTrue(w.endswith(b"\n"))
            self.assertEqual(w.count(b"\n"), 1)
        self.assertEqual(json.loads(writes[0])["kind"], "env")
        self.assertEqual([r["step"] for r in read_records(self.sink)], [1, 2, 3])
        self.assertEqual(read_records(self.sink)[0]["extra_field"], "x")

    def test_restored_continues_the_count(self):
        self.pilot()
        slurm_pilot.restored(4)
        slurm_pilot.step(1.0)
        slurm_pilot.step(1.0)
        slurm_pilot.step(1.0, step=10)
        slurm_pilot.step(1.0)
        self.assertEqual([r["step"] for r in read_records(self.sink)], [5, 6, 10, 11])

    def test_nan_loss_is_the_nan_token(self):
        self.pilot()
        slurm_pilot.step(torch.tensor(float("nan")))
        slurm_pilot.step(float("inf"))
        with open(self.sink, "rb") as f:
            lines = f.read().splitlines()[1:]  # after the env line
        self.assertIn(b'"loss":NaN', lines[0])
        self.assertIn(b'"loss":Infinity', lines[1])
        self.assertTrue(math.isnan(read_records(self.sink)[0]["loss"]))

    def test_long_lines_drop_extras_not_core_fields(self):
        self.pilot(RANK=1)
        model, opt, loss = self.model_step()
        extras = {"extra_%03d" % i: "v" * 100 for i in range(100)}
        slurm_pilot.step(loss, tokens=30, model=model, optimizer=opt, seq_len=3, micro_batch=1,
                         **extras)
        with open(self.sink, "rb") as f:
            env, line = f.read().splitlines(keepends=True)
        self.assertEqual(json.loads(env)["kind"], "env")
        self.assertLess(len(line), 4096)
        rec = json.loads(line)
        for key in ("step", "loss", "rank", "tokens", "lr", "seq_len", "micro_batch", "device",
                    "peak_rss_bytes", "params", "param_bytes", "grad_bytes",
                    "optimizer_state_bytes", "probe_ms"):
            self.assertIn(key, rec)
        kept = [k for k in rec if k.startswith("extra_")]
        self.assertGreater(len(kept), 0)
        self.assertEqual(rec["dropped"], 100 - len(kept))

    def test_extras_do_not_replace_probe_fields(self):
        self.pilot()
        slurm_pilot.step(2.0, device="tpu", probe_ms=-1, mine=[1, 2])
        rec, = read_records(self.sink)
        self.assertEqual(rec["device"], "cpu")
        self.assertGreaterEqual(rec["probe_ms"], 0)
        self.assertEqual(rec["mine"], [1, 2])

    def test_socket_sink(self):
        # The supervisor's sink: a Unix stream socket the probe connects to
        # once per process, each record one line.
        path = os.path.join(self.dir, "m.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        got = []

        def serve():
            conn, _ = server.accept()
            with conn:
                data = b""
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            got.append(data)

        reader = threading.Thread(target=serve)
        reader.start()
        os.environ["PILOT_METRICS"] = path
        for i in range(5):
            slurm_pilot.step(float(i))
        fresh_probe()  # closes the connection: the reader sees its end
        reader.join(10)
        server.close()
        lines = [json.loads(x) for x in got[0].splitlines()]
        self.assertEqual(lines[0]["kind"], "env")
        self.assertEqual([r["step"] for r in lines[1:]], [1, 2, 3, 4, 5])

    def test_fifo_sink(self):
        fifo = os.path.join(self.dir, "fifo")
        os.mkfifo(fifo)
        got = []
        reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
        reader.start()
        os.environ["PILOT_METRICS"] = fifo
        for i in range(5):
            slurm_pilot.step(float(i))
        fresh_probe()  # closes the write end: the reader sees end of file
        reader.join(10)
        lines = [json.loads(x) for x in got[0].splitlines()]
        self.assertEqual(lines[0]["kind"], "env")
        self.assertEqual([r["step"] for r in lines[1:]], [1, 2, 3, 4, 5])

    def test_env_line_once_per_process_before_its_first_record(self):
        self.pilot(RANK=2)
        slurm_pilot.step(1.0)
        slurm_pilot.step(1.0)
        pid = os.fork()
        if pid == 0:  # a forked child is a process of its own
            try:
                slurm_pilot.step(1.0, step=3)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        lines = read_lines(self.sink)
        self.assertEqual([(r.get("kind"), r.get("step")) for r in lines],
                         [("env", None), (None, 1), (None, 2), ("env", None), (None, 3)])
        env = lines[0]
        self.assertEqual(set(env), {"kind", "rank", "python", "torch", "cuda", "hip", "nccl",
                                    "cudnn", "gpu", "gpu_capability", "gpu_count"})
        self.assertEqual(env["rank"], 2)
        self.assertEqual(env["python"], platform.python_version())
        self.assertEqual(env["torch"], str(torch.__version__))
        self.assertEqual(env["cuda"], torch.version.cuda)
        self.assertIsNone(env["gpu"])  # the loss is not on a GPU
        self.assertIsNone(env["gpu_capability"])
        self.assertIsInstance(env["gpu_count"], int)

    def test_param_dtype_holds_most_bytes(self):
        self.pilot()
        mostly_bf16 = torch.nn.Sequential(torch.nn.Linear(8, 8).bfloat16(), torch.nn.Linear(2, 2))
        mostly_f32 = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(2, 2).half())
        slurm_pilot.step(1.0, model=mostly_bf16)
        slurm_pilot.step(1.0, model=mostly_f32)
        slurm_pilot.step(1.0)
        a, b, c = read_records(self.sink)
        self.assertEqual(a["param_dtype"], "bfloat16")
        self.assertEqual(b["param_dtype"], "float32")
        self.assertNotIn("param_dtype", c)

    def test_autocast_and_grad_scaler_since_the_previous_record(self):
        self.pilot()
        slurm_pilot.step(1.0)  # the probe watches torch from its first call
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pass
        slurm_pilot.step(1.0)
        slurm_pilot.step(1.0)  # nothing entered since the last record
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
            pass
        slurm_pilot.step(1.0)

        @torch.cpu.amp.autocast()  # a subclass, as a decorator
        def forward():
            return 1

        forward()
        scaler_class = getattr(torch.amp, "GradScaler", None) or torch.cuda.amp.GradScaler
        scaler = scaler_class(enabled=False)
        self.assertEqual(scaler.scale([]), [])  # disabled: not counted
        slurm_pilot.step(1.0)
        scaler._enabled = True  # as on a GPU; scaling an empty list touches no device
        scaler.scale([])
        slurm_pilot.step(1.0)
        slurm_pilot.step(1.0)
        recs = read_records(self.sink)
        self.assertEqual([(r.get("autocast"), r.get("autocast_device"), r.get("grad_scaler"))
                          for r in recs],
                         [(None, None, None), ("bfloat16", "cpu", None), (None, None, None),
                          (None, None, None), ("bfloat16", "cpu", None), (None, None, True),
                          (None, None, None)])

    def test_autocast_seen_at_the_first_step(self):
        """Imported after torch, the probe watches from its import; before torch,
        from steps() or resume_dir(), which programs call before training."""
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        code = ("import {first}, {second}\n"
                "slurm_pilot.steps()\n"
                "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
                "    pass\n"
                "slurm_pilot.step(1.0)\n")
        procs = []
        for i, order in enumerate((("torch", "slurm_pilot"), ("slurm_pilot", "torch"))):
            sink = os.path.join(self.dir, "m%d.jsonl" % i)
            procs.append((sink, subprocess.Popen(
                [sys.executable, "-c", code.format(first=order[0], second=order[1])],
                env=dict(env, PILOT_METRICS=sink), stderr=subprocess.PIPE)))
        for sink, proc in procs:
            _, err = proc.communicate(timeout=60)
            self.assertEqual(proc.returncode, 0, err.decode(errors="replace"))
            rec, = read_records(sink)
            self.assertEqual((rec["step"], rec["autocast"], rec["autocast_device"]),
                             (1, "bfloat16", "cpu"))

    def test_wrappers_never_fail_the_program(self):
        class Thing:
            def method(self, x):
                return x + 1

        original = Thing.method
        _watch.wrap(Thing, "method", lambda self: 1 / 0)
        _watch.wrap(Thing, "method", lambda self: 1 / 0)  # once only
        self.assertEqual(Thing().method(1), 2)
        self.assertIs(Thing.method.__wrapped__, original)
        _watch.wrap(Thing, "absent", lambda self: None)
        self.assertFalse(hasattr(Thing, "absent"))

    def test_a_scaler_imported_late_is_watched_too(self):
        """As FSDP's ShardedGradScaler: its module imported after the probe's first call."""
        class Scaler:
            def is_enabled(self):
                return True

            def scale(self, loss):
                return loss

        late = types.ModuleType("pilot_test_late_scaler")
        late.Scaler = Scaler
        hook = ("pilot_test_late_scaler", "Scaler", "scale", _watch.note_scaler)
        _state.hooks_left.append(hook)
        try:
            self.pilot()
            slurm_pilot.step(1.0)
            self.assertIn(hook, _state.hooks_left)  # not imported yet
            sys.modules[late.__name__] = late
            slurm_pilot.step(1.0)
            Scaler().scale(2.0)
            slurm_pilot.step(1.0)
        finally:
            sys.modules.pop(late.__name__, None)
            if hook in _state.hooks_left:
                _state.hooks_left.remove(hook)
        self.assertEqual([r.get("grad_scaler") for r in read_records(self.sink)], [None, None, True])

    # State fingerprints: a small model, AdamW and a schedule trained 3 steps,
    # saved, trained on, then restored into fresh objects.

    def training(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Dropout(0.2),
                                    torch.nn.Linear(8, 3))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
        return model, opt, sched

    def train(self, model, opt, sched, n):
        for _ in range(n):
            loss = model(torch.randn(4, 6)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()

    def save_and_restore(self, restore_torch_rng=True, after_restore=None):
        """(saved's components, restored's): a checkpoint after step 3, two more
        steps, then fresh objects restored from it."""
        self.pilot(RANK=1)
        model, opt, sched = self.training()
        random.seed(5)
        self.train(model, opt, sched, 3)
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict(), "rng": torch.get_rng_state(),
                    "py": random.getstate()}, buf)
        a = slurm_pilot.saved(3, model=model, optimizer=opt, scheduler=sched,
                              data_position={"epoch": 0, "batch": 3})
        self.train(model, opt, sched, 2)
        random.random()
        model, opt, sched = self.training()
        buf.seek(0)
        ck = torch.load(buf, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        random.setstate(ck["py"])
        if restore_torch_rng:
            torch.set_rng_state(ck["rng"])
        if after_restore is not None:
            after_restore(model, opt, sched)
        b = slurm_pilot.restored(3, model=model, optimizer=opt, scheduler=sched,
                                 data_position={"batch": 3, "epoch": 0})
        return a, b

    @staticmethod
    def differ(a, b):
        return {k for k in set(a) | set(b) if a.get(k, {}).get("digest") != b.get(k, {}).get("digest")}

    def test_fingerprints_agree_after_a_correct_restore(self):
        a, b = self.save_and_restore()
        self.assertEqual(a, b)
        names = ["model", "optimizer", "optimizer.hyper", "scheduler", "rng.python"]
        names += ["rng.numpy"] if "numpy" in sys.modules else []
        names += ["rng.torch", "data"]
        self.assertEqual(list(a), names)  # not CUDA's: CUDA is not initialized
        for c in a.values():
            self.assertRegex(c["digest"], "^[0-9a-f]{16}$")
        self.assertEqual(a["model"]["tensors"], 4)
        self.assertEqual(a["optimizer"]["tensors"], 12)  # step, exp_avg, exp_avg_sq of each
        self.assertAlmostEqual(a["optimizer.hyper"]["lr"], 1e-2 / 4)
        self.assertEqual(a["scheduler"]["last_epoch"], 3)
        self.assertEqual(a["data"]["value"], '{"batch":3,"epoch":0}')
        saved, restored = read_records(self.sink, "state")
        self.assertEqual({k: saved[k] for k in ("kind", "when", "step", "rank")},
                         {"kind": "state", "when": "saved", "step": 3, "rank": 1})
        self.assertEqual((restored["when"], restored["step"]), ("restored", 3))
        self.assertEqual(saved["components"], a)
        self.assertEqual(restored["components"], b)
        slurm_pilot.step(1.0)  # restored() still sets the count
        self.assertEqual(read_records(self.sink)[-1]["step"], 4)

    def test_rng_not_restored_differs_in_rng_torch(self):
        a, b = self.save_and_restore(restore_torch_rng=False)
        self.assertEqual(self.differ(a, b), {"rng.torch"})

    def test_scheduler_stepped_twice_differs_in_the_scheduler(self):
        a, b = self.save_and_restore(after_restore=lambda model, opt, sched: sched.step())
        # the schedule's step sets the optimizer's learning rate too
        self.assertEqual(self.differ(a, b), {"scheduler", "optimizer.hyper"})
        self.assertEqual((a["scheduler"]["last_epoch"], b["scheduler"]["last_epoch"]), (3, 4))

    def test_generators_left_alone_are_untouched(self):
        self.pilot()
        slurm_pilot.step(1.0)  # the probe sees the generators as they start
        c = slurm_pilot.saved(1)
        self.assertIs(c["rng.python"]["untouched"], True)
        random.random()
        c = slurm_pilot.saved(2)
        self.assertNotIn("untouched", c["rng.python"])
        self.assertNotIn("untouched", c["rng.torch"])

    def test_other_components_and_errors(self):
        self.pilot()

        class Broken(torch.nn.Module):
            def state_dict(self, *args, **kwargs):
                raise RuntimeError("no state here " + "x" * 100)

        sampler = torch.optim.lr_scheduler.LambdaLR(
            torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1), lambda s: 1)
        c = slurm_pilot.saved(7, model=Broken(), curriculum={"stage": 2}, loader=sampler,
                              table=torch.arange(3), weird=object())
        self.assertEqual(list(c)[-4:], ["curriculum", "loader", "table", "weird"])
        err = c["model"]["error"]
        self.assertTrue(err.startswith("RuntimeError: no state here"), err)
        self.assertEqual(len(err), 80)
        self.assertEqual(c["curriculum"]["value"], '{"stage":2}')
        self.assertEqual(set(c["loader"]), {"digest"})  # an object with state_dict()
        self.assertEqual(c["table"]["value"], "[0,1,2]")
        self.assertIn("error", c["weird"])
        rec, = read_records(self.sink, "state")
        self.assertEqual(rec["components"], c)

    def test_state_line_stays_under_4096_bytes(self):
        self.pilot()
        model, opt, _ = self.model_step()
        # details go first, from the end, and only as far as needed
        few = {"c%02d" % i: "y" * 150 for i in range(28)}
        c = slurm_pilot.saved(1, model=model, optimizer=opt, **few)
        # then whole components, from the end
        many = {"component_%03d" % i: "v" * 200 for i in range(100)}
        slurm_pilot.saved(2, model=model, optimizer=opt, **many)
        with open(self.sink, "rb") as f:
            lines = [x for x in f.read().splitlines(keepends=True) if b'"kind":"state"' in x]
        first, second = (json.loads(x) for x in lines)
        for x in lines:
            self.assertLessEqual(len(x), 4095)
        self.assertNotIn("dropped", first)
        kept = [k for k in few if "value" in first["components"][k]]
        self.assertTrue(0 < len(kept) < len(few), kept)
        self.assertEqual(kept, list(few)[:len(kept)])
        self.assertEqual(list(first["components"]), list(c))
        self.assertEqual(first["components"]["model"], c["model"])  # details of the front stay
        names = list(second["components"])
        self.assertEqual(second["dropped"], len(c) - len(few) + len(many) - len(names))
        self.assertGreater(second["dropped"], 0)
        self.assertEqual(names[:3], ["model", "optimizer", "optimizer.hyper"])
        self.assertEqual(names[-1], "component_%03d" % (len(many) - second["dropped"] - 1))
        for comp in second["components"].values():
            self.assertEqual(set(comp), {"digest"})

    def test_nothing_outside_a_pilot(self):
        model, opt, _ = self.model_step()
        calls = []
        model.state_dict = lambda *a, **k: calls.append("model")
        real = _digest.digest
        _digest.digest = lambda value: calls.append("digest")
        try:
            self.assertIsNone(slurm_pilot.saved(3, model=model, optimizer=opt, data_position=3))
            self.assertIsNone(slurm_pilot.restored(3, model=model, optimizer=opt))
        finally:
            _digest.digest = real
        self.assertEqual(calls, [])
        self.assertEqual(os.listdir(self.dir), [])
        self.pilot()
        slurm_pilot.step(1.0)
        self.assertEqual(read_records(self.sink)[0]["step"], 4)

    def test_digest_is_canonical(self):
        d = lambda v: _digest.digest(v)[0]  # noqa: E731
        self.assertEqual(d({"a": 1, "b": [2, 3]}), d({"b": (2, 3), "a": 1}))
        self.assertEqual(len({d(1), d(1.0), d(True), d("1"), d(None), d([1])}), 6)
        t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        self.assertEqual(d(t.t()), d(t.t().contiguous()))
        self.assertEqual(d(t), d(t.clone().requires_grad_()))
        self.assertNotEqual(d(t), d(t.reshape(3, 2)))
        self.assertNotEqual(d(torch.zeros(3)), d(torch.zeros(3, dtype=torch.int32)))
        self.assertNotEqual(d(t.bfloat16()), d(t.half()))
        self.assertEqual(d(torch.zeros(0)), d(torch.zeros(0)))
        u = t.clone()
        u[1, 1] = -0.0 if u[1, 1] == 0 else u[1, 1] + 1e-6
        self.assertNotEqual(d(t), d(u))
        self.assertEqual(d(object()), d(object()))  # repr without its address
        self.assertEqual(_digest.digest({"w": t, "n": [t, 1]})[1], 2)
        numpy = sys.modules.get("numpy")
        if numpy is not None:  # the bytes, not the shortened repr
            a = numpy.zeros(10000)
            b = a.copy()
            b[5000] = 1
            self.assertNotEqual(d(a), d(b))


class DeferredTest(ProbeCase):
    """Records whose numbers are on the device, its part faked on the CPU (FakeStaging): no
    wait at the call, written in step order once their marks pass, and at the last step,
    around the checkpoint's step, before a state line and at exit; never lost, never
    reordered."""

    def deferred(self, queries=None, **env):
        self.pilot(**env)
        staging = FakeStaging(queries)
        _state.current().staging = staging
        return staging

    def steps(self, first, last, **kw):
        for n in range(first, last + 1):
            slurm_pilot.step(torch.tensor(float(n)), tokens=torch.tensor(8), **kw)

    def written(self):
        return [r["step"] for r in read_records(self.sink)]

    def test_nothing_waits_for_the_device_at_the_call(self):
        s = self.deferred(PILOT_STEPS=100)
        loss = torch.tensor(2.5)
        out = slurm_pilot.step(loss, tokens=torch.tensor(30.0), grad_norm=0.5,
                               lr=torch.tensor(0.25, dtype=torch.float64))
        loss.fill_(99.0)  # the program reuses it: the copy made at the call counts
        self.assertEqual(read_lines(self.sink), [])  # not even the env line yet
        self.assertEqual(out["loss"].data_ptr(), loss.data_ptr())  # the values handed in
        self.assertEqual((s.copies, len(s.marks), s.waited), (3, 1, []))
        s.passes(1)
        slurm_pilot.step(torch.tensor(3.0))
        lines = read_lines(self.sink)
        self.assertEqual([line.get("kind") for line in lines], ["env", None])
        rec = lines[1]
        self.assertEqual((rec["step"], rec["loss"], rec["tokens"], rec["grad_norm"], rec["lr"]),
                         (1, 2.5, 30, 0.5, 0.25))
        self.assertIsInstance(rec["tokens"], int)
        self.assertEqual(out, rec)  # the same dictionary, now the record as written
        self.assertEqual(s.waited, [])
        self.assertEqual(s.released, 3)

    def test_a_loss_not_one_number_fails_at_the_call_and_no_graph_is_kept(self):
        self.deferred(PILOT_STEPS=100)
        with self.assertRaises((RuntimeError, ValueError)):
            slurm_pilot.step(torch.ones(2))
        model, opt, loss = self.model_step()
        out = slurm_pilot.step(loss)
        self.assertIsNotNone(loss.grad_fn)
        self.assertIsNone(out["loss"].grad_fn)  # held detached while the record waits

    def test_order_is_kept_whatever_order_the_marks_pass_in(self):
        s = self.deferred(PILOT_STEPS=100)
        self.steps(1, 4)
        s.passes(2, 3, 4)  # step 1's copy is still on its way
        self.steps(5, 5)
        self.assertEqual(self.written(), [])
        s.passes(1)
        self.steps(6, 6)
        self.assertEqual(self.written(), [1, 2, 3, 4])
        s.passes(6)  # 6 before 5
        self.steps(7, 7)
        self.assertEqual(self.written(), [1, 2, 3, 4])
        s.passes(5)
        slurm_pilot.step(8.0)  # nothing on the device, but behind step 7, which waits
        self.assertEqual(self.written(), [1, 2, 3, 4, 5, 6])
        s.passes(7)
        self.steps(9, 9)
        recs = read_records(self.sink)
        self.assertEqual([r["step"] for r in recs], [1, 2, 3, 4, 5, 6, 7, 8])
        self.assertEqual([r["loss"] for r in recs], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
        self.assertEqual(s.waited, [])
        self.assertEqual(len(read_records(self.sink, "env")), 1)

    def test_the_last_step_writes_every_record(self):
        s = self.deferred(PILOT_STEPS=5)
        self.steps(1, 4)
        self.assertEqual(self.written(), [])
        self.steps(5, 5)
        self.assertEqual(self.written(), [1, 2, 3, 4, 5])
        self.assertEqual(s.waited, [1, 2, 3, 4, 5])  # in step order

    def test_the_checkpoint_step_and_the_next_are_written_at_their_call(self):
        s = self.deferred(PILOT_STEPS=100, PILOT_CHECKPOINT_STEP=3)
        self.steps(1, 2)
        self.assertEqual(self.written(), [])
        self.steps(3, 3)  # before the save of step 3
        self.assertEqual(self.written(), [1, 2, 3])
        self.steps(4, 4)  # before any later save: the supervisor dates step 3's files by it
        self.assertEqual(self.written(), [1, 2, 3, 4])
        self.steps(5, 6)
        self.assertEqual(self.written(), [1, 2, 3, 4])
        self.assertEqual(s.waited, [1, 2, 3, 4])

    def test_a_state_line_comes_after_the_records_before_it(self):
        self.deferred(PILOT_STEPS=100)
        self.steps(1, 2)
        slurm_pilot.saved(2)
        self.assertEqual([(line.get("kind"), line.get("step")) for line in read_lines(self.sink)],
                         [("env", None), (None, 1), (None, 2), ("state", 2)])

    def test_step_time_from_the_marks(self):
        self.deferred(PILOT_STEPS=5)
        self.steps(1, 3)
        slurm_pilot.step(4.0)  # no mark: the wall clock's time since the previous call
        self.steps(5, 5)
        a, b, c, d, e = read_records(self.sink)
        self.assertNotIn("step_ms", a)
        self.assertEqual((b["step_ms"], c["step_ms"]), (300.0, 500.0))  # the device's clock
        for r in (d, e):  # after a record without a mark, the wall clock's
            self.assertGreater(r["step_ms"], 0)
            self.assertLess(r["step_ms"], 60_000)
            self.assertNotIn(r["step_ms"], (700.0, 900.0))
        for r in (a, b, c, d, e):
            self.assertGreaterEqual(r["probe_ms"], 0)
        self.assertEqual(list(b)[:list(b).index("step_ms")],
                         ["step", "loss", "rank", "tokens"])

    def test_a_record_is_the_same_on_the_device_or_not(self):
        """The same fields in the same order, the same values (times aside), an extra
        tensor too large for a line dropped alike and never copied."""
        model, opt, loss = self.model_step()

        def run():
            for _ in range(2):
                slurm_pilot.step(loss, tokens=torch.tensor(30), model=model, optimizer=opt,
                                 seq_len=3, micro_batch=1, grad_norm=torch.tensor(0.5),
                                 data_wait_ms=1.5, note="x", mine=torch.tensor([1, 2]),
                                 flag=torch.tensor(True), big=torch.zeros(3000))
            return read_records(self.sink)

        self.pilot(PILOT_STEPS=2)
        cpu = run()
        fresh_probe()
        os.remove(self.sink)
        s = self.deferred(PILOT_STEPS=2)
        device = run()
        self.assertEqual(len(s.marks), 2)
        self.assertEqual(s.copies, 2 * 5)  # loss, tokens, grad_norm, mine, flag
        self.assertEqual(len(cpu), 2)
        times = ("probe_ms", "step_ms", "peak_rss_bytes")
        for a, b in zip(cpu, device):
            self.assertEqual(list(a), list(b))
            self.assertEqual({k: v for k, v in a.items() if k not in times},
                             {k: v for k, v in b.items() if k not in times})
        self.assertEqual((device[0]["mine"], device[0]["flag"], device[0]["dropped"]),
                         ([1, 2], True, 1))
        self.assertNotIn("big", device[0])

    def test_the_queue_is_bounded(self):
        s = self.deferred(PILOT_STEPS=1000)
        self.steps(1, _defer.MAX_WAITING + 2)
        # MAX_WAITING records waiting: the next call waits for the oldest, and the next
        self.assertEqual(s.waited, [1, 2])
        self.assertEqual(self.written(), [1, 2])

    def test_sigterm_is_left_alone(self):
        """The probe installs no handler: a SIGTERM ends the process at once, as before."""
        self.deferred(PILOT_STEPS=100)
        before = signal.getsignal(signal.SIGTERM)
        self.steps(1, 3)
        self.assertEqual(signal.getsignal(signal.SIGTERM), before)

    def run_exit(self, end, queries=3, wait=60.0):
        """A process that reports 5 steps on the (fake) device and ends by ``end``."""
        program = textwrap.dedent("""
            import os, signal, sys
            sys.path[:0] = [%r, %r]
            import torch
            import slurm_pilot
            from slurm_pilot import _defer, _state
            from fake_staging import FakeStaging
            _defer.EXIT_WAIT_SECONDS = %r
            _state.current().staging = FakeStaging(%r)
            for n in range(1, 6):
                slurm_pilot.step(torch.tensor(float(n)), tokens=8)
            %s
        """) % (os.path.join(ROOT, "python"), HERE, wait, queries, end)
        env = {k: v for k, v in os.environ.items() if k not in PILOT_VARS}
        env.update(PILOT_METRICS=self.sink, PILOT_STEPS="100")
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                             text=True, timeout=120)
        return run, time.monotonic() - started

    def test_exit_writes_the_records_waiting(self):
        run, _ = self.run_exit("pass")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.written(), [1, 2, 3, 4, 5])
        self.assertEqual([r["loss"] for r in read_records(self.sink)], [1.0, 2.0, 3.0, 4.0, 5.0])

    def test_an_error_that_ends_the_program_loses_no_record(self):
        run, _ = self.run_exit("raise RuntimeError('the program failed')")
        self.assertEqual(run.returncode, 1)
        self.assertIn("RuntimeError: the program failed", run.stderr)
        self.assertEqual(self.written(), [1, 2, 3, 4, 5])

    def test_exit_does_not_wait_forever_for_the_device(self):
        run, seconds = self.run_exit("pass", queries=None, wait=0.3)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertLess(seconds, 30)
        self.assertEqual(self.written(), [])

    def test_sigterm_ends_the_process_as_before(self):
        run, _ = self.run_exit("os.kill(os.getpid(), signal.SIGTERM); signal.pause()")
        self.assertEqual(run.returncode, -signal.SIGTERM)
        written = self.written()
        self.assertEqual(written, list(range(1, len(written) + 1)))  # what came, in order


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """One process of a test program, started at once; finish() waits for it."""

    def __init__(self, work, name, script, args=(), resume_from=None, world=1, ranks=None,
                 timeout=150):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.timeout = timeout
        env = {k: v for k, v in os.environ.items() if k not in PILOT_VARS}
        env.update(PYTHONPATH=os.path.join(ROOT, "python"), PILOT_STEPS=str(STEPS),
                   PILOT_CHECKPOINT_STEP=str(CKPT), PILOT_CHECKPOINT_DIR=self.ckpt,
                   PILOT_STAGE="single" if world == 1 else "node", PILOT_DEVICE="cpu",
                   PILOT_SEED="1234", PILOT_SEQ_LEN="16", PILOT_MICRO_BATCH="4",
                   PILOT_PROCESS="resumed" if resume_from else "reference",
                   WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        if resume_from:
            env["PILOT_RESUME_DIR"] = resume_from.ckpt
        self.procs = []
        for rank in (ranks if ranks is not None else range(world)):
            e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank),
                     PILOT_METRICS=os.path.join(self.dir, "metrics-%d.jsonl" % rank))
            with open(os.path.join(self.dir, "out-%d" % rank), "wb") as out, \
                    open(os.path.join(self.dir, "err-%d" % rank), "wb") as err:
                self.procs.append(subprocess.Popen(
                    [sys.executable, os.path.join(HERE, script)] + list(args),
                    env=e, stdout=out, stderr=err, cwd=self.dir))

    def finish(self):
        deadline = time.monotonic() + self.timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return self

    def rc(self, rank=0):
        return self.procs[rank].returncode

    def text(self, kind, rank=0):
        with open(os.path.join(self.dir, "%s-%d" % (kind, rank)), "rb") as f:
            return f.read().decode(errors="replace")

    def records(self, rank=0, kind=None):
        return read_records(os.path.join(self.dir, "metrics-%d.jsonl" % rank), kind)

    def losses(self, rank=0, records=None):
        return {r["step"]: r["loss"] for r in (records or self.records(rank))}


class ProgramTest(unittest.TestCase):
    """tiny.py clean and with each fault, under DDP, spawner.py and print_loss.py."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="program-")
        w = cls.work
        R = lambda name, *a, **k: Run(w, name, *a, **k)  # noqa: E731
        cls.hang = R("hang", "tiny.py", ["--fault", "hang"])
        refs = {"clean": R("clean", "tiny.py"),
                "optimizer_not_saved": R("optimizer_not_saved", "tiny.py", ["--fault", "optimizer_not_saved"]),
                "scheduler_reset": R("scheduler_reset", "tiny.py", ["--fault", "scheduler_reset"]),
                "ddp": R("ddp", "tiny.py", world=2),
                "spawner": R("spawner", "spawner.py", world=2, ranks=[0]),
                "print_loss": R("print_loss", "print_loss.py")}
        for fault in ("nan", "no_checkpoint", "oom", "no_metrics", "wrong_shape", "state_outside",
                      "leak"):
            refs[fault] = R(fault, "tiny.py", ["--fault", fault])
        refs["save_every"] = R("save_every", "tiny.py", ["--save-every", "2"])
        refs["autocast"] = R("autocast", "tiny.py", ["--autocast", "bf16", "--require-env", "PATH"])
        refs["require_env"] = R("require_env", "tiny.py", ["--require-env", "PATH", "--require-env",
                                                           "PILOT_TEST_ABSENT_VARIABLE"])
        cls.ref = {k: r.finish() for k, r in refs.items()}
        clean = cls.ref["clean"]
        resumed = {"clean": R("clean-resumed", "tiny.py", resume_from=clean),
                   "ddp": R("ddp-resumed", "tiny.py", resume_from=cls.ref["ddp"], world=2),
                   "spawner": R("spawner-resumed", "spawner.py", resume_from=cls.ref["spawner"],
                                world=2, ranks=[0]),
                   "print_loss": R("print_loss-resumed", "print_loss.py", resume_from=cls.ref["print_loss"]),
                   "save_every": R("save_every-resumed", "tiny.py", ["--save-every", "2"],
                                   resume_from=cls.ref["save_every"]),
                   "autocast": R("autocast-resumed", "tiny.py", ["--autocast", "bf16"],
                                 resume_from=cls.ref["autocast"])}
        for fault in ("optimizer_not_saved", "scheduler_reset", "state_outside"):
            resumed[fault] = R(fault + "-resumed", "tiny.py", ["--fault", fault], resume_from=cls.ref[fault])
        for fault in ("rng_not_restored", "resume_ignored", "raise_on_resume",
                      "scheduler_stepped_twice", "data_not_restored"):
            resumed[fault] = R(fault + "-resumed", "tiny.py", ["--fault", fault], resume_from=clean)
        cls.res = {k: r.finish() for k, r in resumed.items()}
        cls.hang_alive = cls.hang.procs[0].poll() is None
        cls.hang.procs[0].kill()
        cls.hang.finish()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work)

    def assertClean(self, run, rank=0):
        self.assertEqual(run.rc(rank), 0, run.text("err", rank)[-2000:])

    def assertResumesBitwise(self, ref, res, rank=0, ref_records=None, res_records=None):
        a = ref.losses(rank, ref_records)
        b = res.losses(rank, res_records)
        self.assertEqual(sorted(a), list(range(1, STEPS + 1)))
        self.assertEqual(sorted(b), list(range(CKPT + 1, STEPS + 1)))
        for s in range(CKPT + 1, STEPS + 1):
            self.assertEqual(a[s].hex(), b[s].hex(), "step %d" % s)

    def diverges(self, ref, res):
        a, b = ref.losses(), res.losses()
        self.assertEqual(min(b), CKPT + 1)
        return any(a[s] != b[s] for s in range(CKPT + 1, STEPS + 1))

    def fingerprints(self, ref, res, rank=0, sink=None):
        """(names whose digests differ, saved's components, restored's): the
        reference's fingerprint of its save at CKPT against the resumed
        process's of its restore, for `rank` (in the metrics of `sink`)."""
        sink = rank if sink is None else sink
        saved = [r for r in ref.records(sink, "state")
                 if r["when"] == "saved" and r["step"] == CKPT and r["rank"] == rank]
        restored = [r for r in res.records(sink, "state")
                    if r["when"] == "restored" and r["rank"] == rank]
        self.assertEqual(len(saved), 1, ref.records(sink, "state"))
        self.assertEqual(len(restored), 1, res.records(sink, "state"))
        self.assertEqual(restored[0]["step"], CKPT)
        a, b = saved[0]["components"], restored[0]["components"]
        # numpy's generator is there only where something imported numpy
        self.assertEqual([k for k in a if k != "rng.numpy"], [k for k in b if k != "rng.numpy"])
        for c in list(a.values()) + list(b.values()):
            self.assertRegex(c["digest"], "^[0-9a-f]{16}$")
        return {k for k in a if k in b and a[k]["digest"] != b[k]["digest"]}, a, b

    def test_clean_resumes_bitwise(self):
        ref, res = self.ref["clean"], self.res["clean"]
        self.assertClean(ref)
        self.assertClean(res)
        self.assertTrue(os.path.isfile(os.path.join(ref.ckpt, "ckpt.pt")))
        self.assertResumesBitwise(ref, res)
        lr_ref = {r["step"]: r["lr"] for r in ref.records()}
        self.assertEqual({r["step"]: r["lr"] for r in res.records()},
                         {s: lr_ref[s] for s in range(CKPT + 1, STEPS + 1)})
        rec = ref.records()[0]
        self.assertEqual((rec["seq_len"], rec["micro_batch"], rec["tokens"]), (16, 4, 64))
        self.assertEqual(rec["rank"], 0)
        self.assertGreater(rec["params"], 0)
        self.assertEqual(rec["param_dtype"], "float32")
        self.assertNotIn("autocast", rec)
        self.assertNotIn("grad_scaler", rec)
        self.assertIn("step 8 loss", ref.text("out"))
        for run in (ref, res):  # one env line, just before the first step record
            lines = read_lines(os.path.join(run.dir, "metrics-0.jsonl"))
            first = [i for i, r in enumerate(lines) if "kind" not in r][0]
            self.assertEqual(run.records(0, "env"), [lines[first - 1]])
        env, = res.records(0, "env")
        self.assertEqual((env["torch"], env["gpu"], env["rank"]), (str(torch.__version__), None, 0))
        differ, saved, restored = self.fingerprints(ref, res)
        self.assertEqual(differ, set())
        for name in ("model", "optimizer", "optimizer.hyper", "scheduler", "rng.python", "rng.torch",
                     "data"):
            self.assertIn(name, saved)
        self.assertEqual(saved["data"]["value"], str(CKPT))
        self.assertEqual(saved["scheduler"]["last_epoch"], CKPT)
        self.assertEqual(saved, restored)
        # the resumed process read the reference's folder and saved nothing of its own
        self.assertFalse(os.path.exists(res.ckpt))

    def test_ddp_resumes_bitwise_on_every_rank(self):
        ref, res = self.ref["ddp"], self.res["ddp"]
        for rank in (0, 1):
            self.assertClean(ref, rank)
            self.assertClean(res, rank)
            self.assertEqual({r["rank"] for r in ref.records(rank)}, {rank})
            self.assertResumesBitwise(ref, res, rank)
            differ, saved, _ = self.fingerprints(ref, res, rank)
            self.assertEqual(differ, set())
        self.assertTrue(os.path.isfile(os.path.join(ref.ckpt, "rng-1.pt")))
        self.assertNotEqual(ref.losses(0), ref.losses(1))  # each rank its own batch

    def test_spawner_workers_share_one_sink(self):
        ref, res = self.ref["spawner"], self.res["spawner"]
        self.assertClean(ref)
        self.assertClean(res)
        for rank in (0, 1):
            a = [r for r in ref.records() if r["rank"] == rank]
            b = [r for r in res.records() if r["rank"] == rank]
            self.assertEqual(b[0]["step"], CKPT + 1)
            self.assertResumesBitwise(ref, res, ref_records=a, res_records=b)
            self.assertEqual(self.fingerprints(ref, res, rank, sink=0)[0], set())
        self.assertEqual(sorted(r["rank"] for r in res.records(0, "env")), [0, 1])

    def test_print_loss_reports_only_on_stdout(self):
        ref, res = self.ref["print_loss"], self.res["print_loss"]
        self.assertClean(ref)
        self.assertClean(res)
        self.assertEqual(ref.records(), [])
        self.assertFalse(os.path.exists(os.path.join(ref.dir, "metrics-0.jsonl")))
        pat = re.compile(r"loss=([0-9.eE+-]+)")
        a = [m.group(1) for m in map(pat.search, ref.text("out").splitlines()) if m]
        b = [m.group(1) for m in map(pat.search, res.text("out").splitlines()) if m]
        self.assertEqual(len(a), STEPS)
        self.assertEqual(b, a[CKPT:])
        self.assertTrue(res.text("out").startswith("iter %d:" % (CKPT + 1)))

    def test_optimizer_not_saved(self):
        ref, res = self.ref["optimizer_not_saved"], self.res["optimizer_not_saved"]
        self.assertClean(ref)
        self.assertClean(res)
        ck = torch.load(os.path.join(ref.ckpt, "ckpt.pt"), weights_only=False)
        self.assertNotIn("optimizer", ck)
        self.assertTrue(self.diverges(ref, res))
        # a fresh optimizer: no state, and the constructor's learning rate
        differ, saved, restored = self.fingerprints(ref, res)
        self.assertEqual(differ, {"optimizer", "optimizer.hyper"})
        self.assertEqual(restored["optimizer"]["tensors"], 0)
        self.assertNotEqual(saved["optimizer.hyper"]["lr"], restored["optimizer.hyper"]["lr"])

    def test_scheduler_reset(self):
        ref, res = self.ref["scheduler_reset"], self.res["scheduler_reset"]
        self.assertClean(res)
        ck = torch.load(os.path.join(ref.ckpt, "ckpt.pt"), weights_only=False)
        self.assertNotIn("scheduler", ck)
        self.assertTrue(self.diverges(ref, res))
        lr_ref = {r["step"]: r["lr"] for r in ref.records()}
        self.assertNotEqual({r["step"]: r["lr"] for r in res.records()},
                            {s: lr_ref[s] for s in range(CKPT + 1, STEPS + 1)})
        differ, saved, restored = self.fingerprints(ref, res)
        self.assertEqual(differ, {"scheduler"})
        self.assertEqual((saved["scheduler"]["last_epoch"], restored["scheduler"]["last_epoch"]),
                         (CKPT, 0))

    def test_rng_not_restored(self):
        res = self.res["rng_not_restored"]
        self.assertClean(res)
        self.assertTrue(self.diverges(self.ref["clean"], res))
        self.assertEqual(self.fingerprints(self.ref["clean"], res)[0], {"rng.torch"})

    def test_scheduler_stepped_twice(self):
        ref, res = self.ref["clean"], self.res["scheduler_stepped_twice"]
        self.assertClean(res)
        self.assertTrue(self.diverges(ref, res))
        differ, saved, restored = self.fingerprints(ref, res)
        # the schedule's extra step also set the optimizer's learning rate
        self.assertEqual(differ, {"scheduler", "optimizer.hyper"})
        self.assertEqual((saved["scheduler"]["last_epoch"], restored["scheduler"]["last_epoch"]),
                         (CKPT, CKPT + 1))

    def test_data_not_restored(self):
        ref, res = self.ref["clean"], self.res["data_not_restored"]
        self.assertClean(res)
        self.assertTrue(self.diverges(ref, res))
        differ, saved, restored = self.fingerprints(ref, res)
        self.assertEqual(differ, {"data"})
        self.assertEqual((saved["data"]["value"], restored["data"]["value"]), (str(CKPT), "0"))

    def test_state_outside_the_fingerprints(self):
        ref, res = self.ref["state_outside"], self.res["state_outside"]
        self.assertClean(ref)
        self.assertClean(res)
        self.assertEqual(self.fingerprints(ref, res)[0], set())
        a, b = ref.losses(), res.losses()
        self.assertNotEqual(a[CKPT + 1], b[CKPT + 1])

    def test_leak_grows_the_resident_set(self):
        run = self.ref["leak"]
        self.assertClean(run)
        rss = [r["peak_rss_bytes"] for r in run.records()]
        self.assertEqual(len(rss), STEPS)
        self.assertEqual(rss, sorted(rss))
        self.assertGreaterEqual(rss[-1] - rss[0], (STEPS - 1) * 6 << 20)
        self.assertEqual(run.losses(), self.ref["clean"].losses())  # training otherwise clean

    def test_save_every_uses_step_folders(self):
        ref, res = self.ref["save_every"], self.res["save_every"]
        self.assertClean(ref)
        self.assertClean(res)
        self.assertResumesBitwise(ref, res)
        self.assertEqual(sorted(os.listdir(ref.ckpt)),
                         ["checkpoint-%d" % s for s in (2, 4, 6, 8)])
        # the resumed process read checkpoint-K from PILOT_RESUME_DIR and saved into its own folder
        self.assertEqual(sorted(os.listdir(res.ckpt)), ["checkpoint-6", "checkpoint-8"])
        self.assertEqual([r["step"] for r in ref.records(0, "state")], [2, 4, 6, 8])
        self.assertEqual([(r["when"], r["step"]) for r in res.records(0, "state")],
                         [("restored", 4), ("saved", 6), ("saved", 8)])
        self.assertEqual(self.fingerprints(ref, res)[0], set())

    def test_autocast_resumes_bitwise(self):
        ref, res = self.ref["autocast"], self.res["autocast"]
        self.assertClean(ref)
        self.assertClean(res)
        self.assertResumesBitwise(ref, res)
        self.assertNotEqual(ref.losses(), self.ref["clean"].losses())
        for rec in ref.records() + res.records():
            self.assertEqual((rec["autocast"], rec["autocast_device"], rec["param_dtype"]),
                             ("bfloat16", "cpu", "float32"))
        self.assertEqual(self.fingerprints(ref, res)[0], set())

    def test_require_env(self):
        run = self.ref["require_env"]
        self.assertEqual(run.rc(), 1)
        self.assertIn("PILOT_TEST_ABSENT_VARIABLE", run.text("err"))
        self.assertNotIn("PATH", run.text("err"))
        self.assertEqual(read_lines(os.path.join(run.dir, "metrics-0.jsonl")), [])

    def test_resume_ignored_starts_at_step_1(self):
        res = self.res["resume_ignored"]
        self.assertClean(res)
        self.assertEqual([r["step"] for r in res.records()], list(range(1, STEPS + 1)))

    def test_raise_on_resume(self):
        res = self.res["raise_on_resume"]
        self.assertNotEqual(res.rc(), 0)
        self.assertIn("KeyError", res.text("err"))
        self.assertEqual(read_lines(os.path.join(res.dir, "metrics-0.jsonl")), [])

    def test_hang_at_step_3(self):
        self.assertTrue(self.hang_alive, self.hang.text("err")[-2000:])
        self.assertEqual([r["step"] for r in self.hang.records()], [1, 2])

    def test_nan_from_step_3(self):
        run = self.ref["nan"]
        self.assertClean(run)
        losses = run.losses()
        self.assertTrue(math.isfinite(losses[2]))
        self.assertTrue(math.isnan(losses[3]))
        with open(os.path.join(run.dir, "metrics-0.jsonl"), "rb") as f:
            self.assertIn(b'"step":3,"loss":NaN', f.read())

    def test_no_checkpoint(self):
        run = self.ref["no_checkpoint"]
        self.assertClean(run)
        self.assertEqual(len(run.records()), STEPS)
        self.assertFalse(os.path.exists(run.ckpt))

    def test_oom_at_step_2(self):
        run = self.ref["oom"]
        self.assertNotEqual(run.rc(), 0)
        # The CPU allocator's words differ between torch versions; CUDA says "out of memory".
        self.assertRegex(run.text("err").lower(),
                         "out of memory|not enough memory|can't allocate memory|cannot allocate memory")
        self.assertEqual([r["step"] for r in run.records()], [1])

    def test_no_metrics(self):
        run = self.ref["no_metrics"]
        self.assertClean(run)
        self.assertFalse(os.path.exists(os.path.join(run.dir, "metrics-0.jsonl")))
        self.assertEqual(run.text("out").count("loss"), STEPS)

    def test_wrong_shape(self):
        run = self.ref["wrong_shape"]
        self.assertClean(run)
        rec = run.records()[0]
        self.assertEqual((rec["seq_len"], rec["tokens"]), (8, 8 * 4))


if __name__ == "__main__":
    unittest.main()
