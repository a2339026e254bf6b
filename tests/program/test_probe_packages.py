"""The probe's "packages" lines: installed distributions and loaded native extensions.

What no other test proves: that a process's distributions reach the
supervisor whole, in lines under the protocol's limit, once per process,
after its first step record; that the native modules it loaded are named by
their top-level module and installing distribution, torch's and the
standard library's left out; and that hostile names never reach a line.
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


class PackagesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="probe-packages-")
        self.saved_env = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("PILOT_")}
        slurm_pilot._probe = None

    def tearDown(self):
        p = slurm_pilot._probe
        if p is not None and p.fd is not None:
            os.close(p.fd)
        slurm_pilot._probe = None
        for k in [k for k in os.environ if k.startswith("PILOT_")]:
            del os.environ[k]
        os.environ.update(self.saved_env)
        shutil.rmtree(self.dir)

    def test_split_into_lines_under_the_limit(self):
        many = {"package-%04d-%s" % (i, "x" * 60): "%d.%d.post%d" % (i, i % 7, i) for i in range(400)}
        saved = slurm_pilot._distributions
        slurm_pilot._distributions = lambda: dict(many)
        try:
            lines = slurm_pilot._packages_lines(3)
        finally:
            slurm_pilot._distributions = saved
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
            line, = slurm_pilot._packages_lines(0)
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


if __name__ == "__main__":
    unittest.main()
