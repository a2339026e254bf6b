"""The device's part of the probe's deferred records (slurm_pilot._defer.Staging), on the CPU,
for the tests: every tensor counts as on the device, its copy is a clone made at the call (as
the device's copy is ordered after the step's work), and a mark passes when the test says so,
when the probe waits for it, or (``queries``) after being asked that many times."""

import types

import torch


class FakeStaging:
    def __init__(self, queries=None):
        self.queries = queries  # a mark passes at its nth query; None: never by itself
        self.marks = []     # every mark made, in order: .n (from 1), .passed, .at_ms
        self.waited = []    # the marks the probe waited for, by .n
        self.copies = 0
        self.released = 0

    def wants(self, value):
        return isinstance(value, torch.Tensor)

    def device(self, value):
        return value.device

    def copy(self, value):
        self.copies += 1
        return value.detach().clone()

    def mark(self, device):
        n = len(self.marks) + 1
        # the device's clock at the mark: steps of 100 x (2n - 1) ms, each its own length
        mark = types.SimpleNamespace(n=n, passed=False, at_ms=100.0 * n * n, asked=0)
        self.marks.append(mark)
        return mark

    def done(self, mark):
        mark.asked += 1
        if self.queries is not None and mark.asked >= self.queries:
            mark.passed = True
        return mark.passed

    def wait(self, mark):
        self.waited.append(mark.n)
        mark.passed = True

    def elapsed_ms(self, earlier, later):
        if not (earlier.passed and later.passed):
            raise RuntimeError("elapsed_ms of a mark the device has not passed")
        return later.at_ms - earlier.at_ms

    def release(self, mark, copies):
        self.released += len(copies)

    def passes(self, *ns):
        """The device passes the marks numbered ``ns``."""
        for n in ns:
            self.marks[n - 1].passed = True
