"""What a process ran with: the probe's "packages" lines (installed
distributions and loaded native extensions), and its deterministic kernels.

What no other test proves: that a process's distributions reach the
supervisor whole, in lines under the protocol's limit, once per process,
after its first step record; that the native modules it loaded are named by
their top-level module and installing distribution, torch's and the
standard library's left out; that hostile names never reach a line; and that
PILOT_DETERMINISTIC=1 (training.deterministic) turns torch's deterministic
algorithms on as the probe is imported after torch (else at the program's
first call of it), and nothing else does.
Run as a script (exits 77, the skip code, when torch is not importable).
"""

import json
import os
import shutil
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

try:
    import torch
except ImportError:
    torch = None
if torch is None:
    if __name__ == "__main__":
        print("torch is not importable: skipped")
        sys.exit(77)
    raise unittest.SkipTest("torch is not importable")

import numpy  # noqa: E402,F401  (a distribution with native modules, Debian's python3-numpy)

import slurm_pilot  # noqa: E402
from slurm_pilot import _env, _state  # noqa: E402


class PackagesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="probe-packages-")
        self.saved_env = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("PILOT_")}
        _state.probe = None

    def tearDown(self):
        p = _state.probe
        if p is not None and p.fd is not None:
            os.close(p.fd)
        _state.probe = None
        for k in [k for k in os.environ if k.startswith("PILOT_")]:
            del os.environ[k]
        os.environ.update(self.saved_env)
        shutil.rmtree(self.dir)

    def test_split_into_lines_under_the_limit(self):
        many = {"package-%04d-%s" % (i, "x" * 60): "%d.%d.post%d" % (i, i % 7, i) for i in range(400)}
        saved = _env.distributions
        _env.distributions = lambda: dict(many)
        try:
            lines = _env.packages_lines(3)
        finally:
            _env.distributions = saved
        self.assertGreater(len(lines), 5)
        got = {}
        for i, line in enumerate(lines):
            self.assertLessEqual(len(line), slurm_pilot.MAX_LINE)
            rec = json.loads(line)
            self.assertEqual((rec["kind"], rec["rank"]), ("packages", 3))
            self.assertEqual("extensions" in rec, i == 0)
            got.update(rec["distributions"])
        self.assertEqual(got, many)

    def test_native_extensions_named_by_module_and_distribution(self):
        fake = types.ModuleType("fastops._C")
        fake.__file__ = os.path.join(self.dir, "fastops", "_C.cpython-311-x86_64-linux-gnu.so")
        evil = types.ModuleType("evil\x1b[2J._C")
        evil.__file__ = "/tmp/evil.so"
        sys.modules["fastops._C"] = fake
        sys.modules[evil.__name__] = evil
        try:
            line, = _env.packages_lines(0)
        finally:
            del sys.modules["fastops._C"], sys.modules[evil.__name__]
        rec = json.loads(line)
        ext = rec["extensions"]
        self.assertEqual(ext.get("fastops"), "")  # no installed distribution holds it
        self.assertEqual(ext.get("numpy"), "numpy " + rec["distributions"]["numpy"])
        for left_out in ("torch", "_json", "_ctypes"):
            self.assertNotIn(left_out, ext)
        self.assertFalse([k for k in ext if "\x1b" in k])
        self.assertIn("torch", rec["distributions"])

    def test_once_per_process_after_its_first_record(self):
        sink = os.path.join(self.dir, "metrics.jsonl")
        os.environ.update(PILOT_METRICS=sink, RANK="0")
        slurm_pilot.step(2.0)
        slurm_pilot.step(1.5)
        with open(sink) as f:
            kinds = [json.loads(line).get("kind", "step") for line in f]
        self.assertEqual(kinds[:2], ["env", "step"])
        self.assertEqual(kinds[-1], "step")
        self.assertEqual(set(kinds[2:-1]), {"packages"})



class DeterminismTest(unittest.TestCase):
    """Each case in a fresh interpreter: torch's switch is per process."""

    # The probe imported first, torch after: on at the first call.
    SHOW = ("import sys; sys.path.insert(0, sys.argv[1]); import slurm_pilot, torch; "
            "before = torch.are_deterministic_algorithms_enabled(); slurm_pilot.steps(); "
            "print(before, torch.are_deterministic_algorithms_enabled(), "
            "torch.is_deterministic_algorithms_warn_only_enabled(), "
            "torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)")

    def run_probe(self, **env):
        import subprocess
        full = {k: v for k, v in os.environ.items() if not k.startswith("PILOT_")}
        full.update(env)
        out = subprocess.run([sys.executable, "-c", self.SHOW,
                              os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")],
                             env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             check=True)
        return out.stdout.split()

    def test_only_when_asked_inside_a_pilot(self):
        sink = os.path.join(tempfile.mkdtemp(prefix="probe-det-"), "metrics")
        try:
            self.assertEqual(self.run_probe(PILOT_METRICS=sink, PILOT_DETERMINISTIC="1"),
                             ["False", "True", "False", "True", "False"])
            self.assertEqual(self.run_probe(PILOT_METRICS=sink)[:2], ["False", "False"])
            # Outside a pilot (no sink) the probe changes nothing.
            self.assertEqual(self.run_probe(PILOT_DETERMINISTIC="1")[:2], ["False", "False"])
        finally:
            shutil.rmtree(os.path.dirname(sink))


if __name__ == "__main__":
    unittest.main()
