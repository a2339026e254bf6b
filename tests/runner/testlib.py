"""What the runner's test scripts share (runner_test.py, save_faults.py):
fresh work folders, reading results.json, and failing with a message."""
import json
import os
import shutil
import sys


def require(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def fresh_in(work, name):
    """An empty folder WORK/NAME."""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def results(out):
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)
