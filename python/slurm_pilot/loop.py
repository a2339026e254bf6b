"""A plain training loop in three lines: resume, report every step, save at K.

    pilot = slurm_pilot.loop.Pilot(model, optimizer, scheduler, data=data)
    for step in pilot.steps(args.steps):      # K+1..N when resumed, 1..N else
        ...                                   # the program's own step
        pilot.step(loss, tokens=n)            # reports it; saves after step K

Inside a pilot the helper saves, after step K, the model, optimizer, scheduler,
scaler and other state_dict() objects (rank 0, ``pilot-state.pt``) and each
rank's random generators and data position (``pilot-rank<r>.pt``) into
PILOT_CHECKPOINT_DIR; the resumed process loads them from PILOT_RESUME_DIR and
starts at K+1. A program with its own checkpoint format passes ``save`` and
``load``. In the run a pilot's grant binds (slurm_pilot.bound()) nothing is
reported, and it saves after every multiple of PILOT_CHECKPOINT_STEP into
PILOT_CHECKPOINT_DIR/pilot-step-<step>, each marked complete once written; a
requeued run loads PILOT_RESUME_DIR/pilot-step-<PILOT_RESUME_STEP>. Outside a
pilot nothing is saved or loaded and nothing is reported: ``steps(n)`` is
range(1, n + 1). Standard library and torch only; see
pilot-program(7).
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Callable

import slurm_pilot
from slurm_pilot import _glue, _rng
from slurm_pilot._glue import Stateful

if TYPE_CHECKING:
    import torch

__all__ = ["Pilot"]

STATE_FILE = "pilot-state.pt"
RANK_FILE = "pilot-rank%d.pt"
STEP_DIR = "pilot-step-%d"  # a bound run's checkpoint of one step


def _torch() -> Any:
    import torch
    return torch


def _save_file(obj: Any, path: str) -> None:
    torch = _torch()
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)  # never a half-written checkpoint


def _load_file(path: str) -> Any:
    torch = _torch()
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch < 1.13: no weights_only
        return torch.load(path, map_location="cpu")


class Pilot:
    """Resume, report and checkpoint a plain loop for its pilot.

    model, optimizer, scheduler, scaler: saved and restored (any may be None).
    data: the data's position, an object with state_dict() and
        load_state_dict(), saved for each rank.
    save: ``save(directory, step)``, the program's own checkpoint in place of
        the helper's (the random generators are still the helper's unless
        rng=False).
    load: ``load(directory)``, restores the program's own checkpoint; returns
        the step it held (None: PILOT_CHECKPOINT_STEP).
    rng: save and restore Python's, numpy's, torch's and CUDA's generators.
    state: other objects with state_dict()/load_state_dict() (an EMA, a
        curriculum), saved with the model.
    """

    def __init__(self, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | None = None, scheduler: Stateful | None = None,
                 *, scaler: Stateful | None = None, data: Stateful | None = None,
                 save: Callable[[str, int], Any] | None = None,
                 load: Callable[[str], int | None] | None = None, rng: bool = True,
                 **state: Stateful) -> None:
        self.model, self.optimizer, self.scheduler, self.scaler = model, optimizer, scheduler, scaler
        self.data, self.state = data, state
        self._save, self._load, self._rng = save, load, rng
        self.last_step = 0  # the last optimizer step taken (or restored)
        self._first = None
        self._lr = None
        if optimizer is not None and slurm_pilot.active():
            hook = getattr(optimizer, "register_step_pre_hook", None)  # torch >= 2.0
            if hook is not None:
                hook(self._before_optimizer_step)
            else:  # older torch: the instance's step, wrapped
                step = optimizer.step

                @functools.wraps(step)
                def noted_step(*args, **kwargs):
                    self._before_optimizer_step(optimizer, args, kwargs)
                    return step(*args, **kwargs)

                optimizer.step = noted_step

    def _before_optimizer_step(self, optimizer, args, kwargs):
        if optimizer.param_groups:
            self._lr = optimizer.param_groups[0].get("lr")

    # ----- what the fingerprints see
    def _data_position(self):
        sd = getattr(self.data, "state_dict", None)
        return sd() if sd is not None else None

    def _fingerprint_state(self):
        return dict(model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
                    scaler=self.scaler, data_position=self._data_position(), **self.state)

    # ----- resume
    def resume(self) -> int:
        """The first step to run: K+1 in the resumed process of a pilot (its checkpoint loaded,
        random generators included), S+1 in a bound run requeued after the save of step S
        (PILOT_RESUME_STEP), else 1."""
        if self._first is not None:
            return self._first
        directory = slurm_pilot.resume_dir()
        if not directory:
            self._first = 1
            return 1
        if slurm_pilot.bound() and slurm_pilot.resume_step() is not None:
            directory = os.path.join(directory, STEP_DIR % slurm_pilot.resume_step())
        step = None
        if self._load is not None:
            step = self._load(directory)
        else:
            step = self._load_state(directory)
        if self._rng or self.data is not None:
            self._load_rank(directory)
        if step is None:
            step = slurm_pilot.resume_step()
        if step is None:
            raise RuntimeError("slurm_pilot.loop: %s: no step in the checkpoint and no "
                               "PILOT_CHECKPOINT_STEP" % directory)
        self.last_step = int(step)
        _glue.restored(self.last_step, **self._fingerprint_state())
        self._first = self.last_step + 1
        return self._first

    def _load_state(self, directory):
        path = os.path.join(directory, STATE_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError("slurm_pilot.loop: no %s in %s (the reference process saves it "
                                    "after step PILOT_CHECKPOINT_STEP)" % (STATE_FILE, directory))
        ck = _load_file(path)
        for name, obj in (("model", self.model), ("optimizer", self.optimizer),
                          ("scheduler", self.scheduler), ("scaler", self.scaler)):
            if obj is not None:
                if ck.get(name) is None:
                    raise KeyError("slurm_pilot.loop: %s holds no %s state" % (path, name))
                obj.load_state_dict(ck[name])
        for name, obj in self.state.items():
            obj.load_state_dict(ck["state"][name])
        return ck["step"]

    def _load_rank(self, directory):
        path = os.path.join(directory, RANK_FILE % _glue.rank())
        if not os.path.exists(path):
            raise FileNotFoundError("slurm_pilot.loop: no %s: rank %d's random generators and data "
                                    "position" % (path, _glue.rank()))
        ck = _load_file(path)
        if self.data is not None and ck.get("data") is not None:
            self.data.load_state_dict(ck["data"])
        if self._rng and ck.get("rng") is not None:
            _rng.set_state(ck["rng"])  # last: loading draws nothing after it

    # ----- save
    def save(self, step: int) -> None:
        """Save the checkpoint of ``step`` into PILOT_CHECKPOINT_DIR (step() does it after step K;
        in a bound run, into its pilot-step-<step> folder after every multiple of K)."""
        directory = slurm_pilot.checkpoint_dir()
        if not directory:
            return
        if slurm_pilot.bound():
            directory = os.path.join(directory, STEP_DIR % step)
        os.makedirs(directory, exist_ok=True)
        rank_state = {"step": step, "data": self._data_position()}
        if self._rng:
            rank_state["rng"] = _rng.state()  # before anything below can draw
        if self._save is not None:
            self._save(directory, step)
        elif _glue.rank() == 0:
            ck = {"step": step, "world_size": _glue.world_size(),
                  "state": {name: obj.state_dict() for name, obj in self.state.items()}}
            for name, obj in (("model", self.model), ("optimizer", self.optimizer),
                              ("scheduler", self.scheduler), ("scaler", self.scaler)):
                ck[name] = obj.state_dict() if obj is not None else None
            _save_file(ck, os.path.join(directory, STATE_FILE))
        if self._rng or self.data is not None:
            _save_file(rank_state, os.path.join(directory, RANK_FILE % _glue.rank()))
        _glue.saved(step, **self._fingerprint_state())

    # ----- the loop
    def steps(self, default: int | None = None) -> range:
        """The steps to run: resume()..PILOT_STEPS inside a pilot, resume()..default outside."""
        last = slurm_pilot.steps()
        if last is None:
            last = default
        if last is None:
            raise ValueError("slurm_pilot.loop: Pilot.steps(): outside a pilot, pass the number of steps")
        return range(self.resume(), int(last) + 1)

    def step(self, loss: torch.Tensor | float, tokens: torch.Tensor | int | None = None,
             **fields: Any) -> dict[str, Any] | None:
        """Report one optimizer step (the next after the last) and save after step K.
        ``fields`` go to slurm_pilot.step(); the learning rate defaults to the one the optimizer
        stepped with. Returns the record written, None outside a pilot."""
        self.last_step += 1
        n = self.last_step
        if not slurm_pilot.active():
            if slurm_pilot.bound() and slurm_pilot.checkpoint_due(n):
                self.save(n)
            return None
        fields.setdefault("model", self.model)
        fields.setdefault("optimizer", self.optimizer)
        if fields.get("lr") is None and self._lr is not None:
            fields["lr"] = self._lr
        self._lr = None
        record = slurm_pilot.step(loss, tokens, step=n, **fields)
        if slurm_pilot.checkpoint_due(n):
            self.save(n)
        return record

