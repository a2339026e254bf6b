"""Fingerprints of the training state at a save and at a restore: the
"state" line, a digest per component over a canonical serialization of its
state (saved() and restored())."""

from __future__ import annotations

import collections.abc
import hashlib
import json
from typing import TYPE_CHECKING, Any, Callable

from slurm_pilot import _defer, _digest, _rng, _sink, _state
from slurm_pilot._pilot import active, bound
from slurm_pilot._resume import mark_complete
from slurm_pilot._util import env_int, number
from slurm_pilot._watch import watch

if TYPE_CHECKING:
    import torch

Component = dict[str, Any]


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)  # a tensor or a numpy value
    if tolist is None:
        raise TypeError("%s is not JSON-able" % type(value).__name__)
    return tolist()


def _value_component(value: Any) -> Component:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain)
    return {"digest": hashlib.sha256(text.encode()).hexdigest()[:16], "value": text[:100]}


def _state_component(state: Any, tensors: bool = False, **details: Any) -> Component:
    """{"digest": ...} of ``state``, with the count of its tensors when asked
    and each detail that is not None."""
    digest, count = _digest.digest(state)
    out = {"digest": digest}
    if tensors:
        out["tensors"] = count
    out.update((k, v) for k, v in details.items() if v is not None)
    return out


def _detail(state: Any, key: str, convert: Callable[[Any], Any]) -> Any:
    value = state.get(key) if isinstance(state, collections.abc.Mapping) else None
    return None if value is None else convert(value)


def _hyper_component(groups: list[dict[str, Any]]) -> Component:
    groups = [{k: v for k, v in g.items() if k != "params"} for g in groups]
    return _state_component(groups, lr=_detail(groups[0], "lr", number) if groups else None)


def _scheduler_component(scheduler: Any) -> Component:
    state = scheduler.state_dict()
    return _state_component(state, last_epoch=_detail(state, "last_epoch", int))


def _scaler_component(scaler: Any) -> Component:
    state = scaler.state_dict()
    return _state_component(state, scale=_detail(state, "scale", number))


def _rng_component(p: _state.Probe, name: str, state: Any) -> Component:
    """A generator's digest; "untouched" when neither seeded nor drawn from
    since the probe first saw it in this process."""
    out = _state_component(state)
    if p.rng_first.get(name) == out["digest"]:
        out["untouched"] = True
    return out


def _other_component(value: Any) -> Component:
    if callable(getattr(value, "state_dict", None)):
        out = _state_component(value.state_dict(), tensors=True)
        if not out["tensors"]:
            del out["tensors"]
        return out
    return _value_component(value)


def _components(p: _state.Probe, model: Any, optimizer: Any, scheduler: Any, scaler: Any,
                data_position: Any, other: dict[str, Any]
                ) -> list[tuple[str, Callable[[], Component]]]:
    """[(name, function computing the component)], in the order of the line."""
    parts = []
    if model is not None:
        parts.append(("model", lambda: _state_component(model.state_dict(), tensors=True)))
    if optimizer is not None:
        memo = []  # one state_dict() for both components

        def optimizer_state():
            if not memo:
                memo.append(optimizer.state_dict())
            return memo[0]

        parts.append(("optimizer",
                      lambda: _state_component(optimizer_state()["state"], tensors=True)))
        parts.append(("optimizer.hyper",
                      lambda: _hyper_component(optimizer_state()["param_groups"])))
    if scheduler is not None:
        parts.append(("scheduler", lambda: _scheduler_component(scheduler)))
    if scaler is not None:
        parts.append(("scaler", lambda: _scaler_component(scaler)))
    for name, get in _rng.generators():
        key = "rng." + name
        parts.append((key, lambda key=key, get=get: _rng_component(p, key, get())))
    if data_position is not None:
        parts.append(("data", lambda: _value_component(data_position)))
    for name, value in other.items():
        parts.append((name, lambda value=value: _other_component(value)))
    return parts


def _encode_state(head: dict[str, Any], components: dict[str, Component]) -> bytes:
    """The state line under MAX_LINE bytes: details go first (the last
    component's first), then whole components from the end ("dropped")."""
    comps = dict(components)
    names = list(comps)

    def encode(dropped):
        rec = dict(head, components=comps)
        if dropped:
            rec["dropped"] = dropped
        return (json.dumps(rec, default=_sink.jsonable, separators=(",", ":")) + "\n").encode()

    line = encode(0)
    for name in reversed(names):
        if len(line) <= _sink.MAX_LINE:
            return line
        comps[name] = {k: v for k, v in comps[name].items() if k in ("digest", "error")}
        line = encode(0)
    dropped = 0
    while len(line) > _sink.MAX_LINE and names:
        del comps[names.pop()]
        dropped += 1
        line = encode(dropped)
    return line


def _fingerprint(when: str, step: int, model: Any, optimizer: Any, scheduler: Any, scaler: Any,
                 data_position: Any, other: dict[str, Any]) -> dict[str, Component]:
    p = _state.current()
    watch()
    components = {}
    for name, compute in _components(p, model, optimizer, scheduler, scaler, data_position,
                                     other):
        try:
            components[name] = compute()
        except Exception as e:  # this component only; never the program's error
            components[name] = {"error": ("%s: %s" % (type(e).__name__, e))[:80]}
    rank = env_int("RANK")
    head = {"kind": "state", "when": when, "step": int(step), "rank": 0 if rank is None else rank}
    line = _encode_state(head, components)
    _defer.flush_current()  # the step records before it first, as step() made them
    _sink.write(p, line)
    return components


def saved(step: int, *, model: torch.nn.Module | None = None,
          optimizer: torch.optim.Optimizer | None = None, scheduler: Any = None,
          scaler: Any = None, data_position: Any = None,
          **other: Any) -> dict[str, dict[str, Any]] | None:
    """Fingerprint the checkpoint of optimizer step ``step``, just saved.

    Call it right after the save, on every rank. Inside a pilot it writes one
    "state" line with a digest per component: the model's and the optimizer's
    state dicts, the optimizer's hyperparameters, the scheduler's and the
    scaler's state dicts, the random generators (Python's, numpy's, torch's,
    CUDA's), ``data_position`` (a JSON-able value) and each further keyword
    argument (an object with state_dict(), or a JSON-able value). It returns
    the components as a dictionary. In a bound run it marks the checkpoint
    complete, the one a requeued run resumes from (_resume.py), and returns
    None; outside both it does nothing and returns None.
    """
    if not active():
        if bound():
            mark_complete(step)
        return None
    return _fingerprint("saved", step, model, optimizer, scheduler, scaler, data_position, other)


def restored(step: int, *, model: torch.nn.Module | None = None,
             optimizer: torch.optim.Optimizer | None = None, scheduler: Any = None,
             scaler: Any = None, data_position: Any = None,
             **other: Any) -> dict[str, dict[str, Any]] | None:
    """Tell the probe the checkpoint held step ``step``: the next record is step+1.

    Call it right after the restore. Inside a pilot it also fingerprints the
    state restored, as saved() does, and returns the components; outside a
    pilot it only sets the step and returns None.
    """
    _state.current().last_step = int(step)
    if not active():
        return None
    return _fingerprint("restored", step, model, optimizer, scheduler, scaler, data_position,
                        other)
