"""What the framework integrations share (slurm_pilot.loop, .hf, .lightning):
the probe's calls as they make them, the token ids of a step's batches, and
the PilotCallback class each makes when its framework is first needed.

Standard library and torch only; nothing here imports a framework.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Iterable, Iterator, Protocol

import slurm_pilot
from slurm_pilot import _defer, _state
from slurm_pilot._util import env_int


class Stateful(Protocol):
    """What a checkpoint holds: an object with state_dict() and load_state_dict()."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> Any: ...


def warn(message: str) -> None:
    """One line on standard error, once per message and process."""
    if message not in _state.warned:
        _state.warned.add(message)
        print("slurm_pilot: " + message, file=sys.stderr, flush=True)


def rank() -> int:
    return env_int("RANK") or 0


def world_size() -> int:
    return env_int("WORLD_SIZE") or 1


def fingerprints() -> bool:
    """True when the probe has saved() and restored(step, **state) (the state's fingerprints)."""
    return getattr(slurm_pilot, "saved", None) is not None


def saved(step: int, **state: Any) -> None:
    """slurm_pilot.saved() where the probe has it: the state of the checkpoint of ``step``."""
    fn = getattr(slurm_pilot, "saved", None)
    if fn is not None:
        fn(step, **{k: v for k, v in state.items() if v is not None})


def restored(step: int, **state: Any) -> None:
    """slurm_pilot.restored(): with the state where the probe fingerprints it, else the step only."""
    if fingerprints():
        slurm_pilot.restored(step, **{k: v for k, v in state.items() if v is not None})
    else:
        slurm_pilot.restored(step)


def resuming() -> bool:
    """True in the resumed process of a pilot, which restores PILOT_RESUME_DIR."""
    return slurm_pilot.process() == "resumed" and bool(slurm_pilot.resume_dir())


def reference_saves(step: int) -> bool:
    """True when optimizer step ``step`` is K and this process is not the resumed one: the
    reference saves the checkpoint the resumed process restores."""
    return slurm_pilot.checkpoint_due(step) and slurm_pilot.process() != "resumed"


def report(record: dict[str, Any]) -> None:
    """slurm_pilot.step() of the record a callback kept for a step: its loss, tokens, step, model
    and optimizer, and each further field that is not None."""
    slurm_pilot.step(record.pop("loss"), record.pop("tokens"), step=record.pop("step"),
                     model=record.pop("model", None), optimizer=record.pop("optimizer", None),
                     **{k: v for k, v in record.items() if v is not None})


def finish() -> None:
    """The training ended: the step records still waiting for the device written now (the probe
    writes them at the last step and at exit too)."""
    _defer.flush_current()


def env_tokens(micro_batch: int | None, accumulation: int) -> int | None:
    """The tokens of a step whose batches showed no token ids: PILOT_SEQ_LEN x the micro-batch
    (PILOT_MICRO_BATCH where ``micro_batch`` is None) x the micro-batches of a step, or None."""
    seq = env_int("PILOT_SEQ_LEN")
    mb = micro_batch or env_int("PILOT_MICRO_BATCH")
    return seq * mb * accumulation if seq and mb else None


class Batches:
    """The token ids of an optimizer step's micro-batches: their tokens, and (micro_batch,
    seq_len) of the first."""

    def __init__(self) -> None:
        self.seen = False  # token ids in a batch, ever (else env_tokens() stands in)
        self.begin()

    def begin(self) -> None:
        """A new optimizer step."""
        self.tokens = 0
        self.shape: tuple[int | None, int | None] = (None, None)

    def add(self, batch: Any, name: str = "input_ids") -> None:
        tokens, micro_batch, seq_len = batch_shape(batch, name)
        if tokens is not None:
            self.seen = True
            self.tokens += tokens
            if self.shape[0] is None:
                self.shape = (micro_batch, seq_len)


class LazyCallback:
    """An integration's PilotCallback class: ``hooks`` (the callback's work, with no framework in
    it) on the framework's callback class, which ``base()`` imports and returns. The class is
    made the first time it is asked for, never by ``import slurm_pilot``."""

    def __init__(self, module: str, hooks: type, base: Callable[[], type], doc: str,
                 frameworks: tuple[str, ...]) -> None:
        self.module, self.hooks, self.base, self.doc = module, hooks, base, doc
        self.frameworks = frameworks  # imported by the program: no reason to wait

    def make(self) -> type:
        """The class (base() raises ImportError where the framework is not installed)."""
        cls = _state.callback_classes.get(self.module)
        if cls is None:
            def body(ns):
                ns.update(__doc__=self.doc, __module__=self.module)
            cls = types.new_class("PilotCallback", (self.hooks, self.base()), {}, body)
            _state.callback_classes[self.module] = cls
        return cls

    def attribute(self, name: str) -> type:
        """The integration module's __getattr__ (PEP 562): PilotCallback, made on first use."""
        if name == "PilotCallback":
            return self.make()
        raise AttributeError("module %r has no attribute %r" % (self.module, name))

    def make_if_imported(self) -> None:
        """Make it now, as the module's attribute, where the program imported the framework."""
        if any(name in sys.modules for name in self.frameworks):
            try:
                sys.modules[self.module].PilotCallback = self.make()
            except ImportError:
                pass


def inner(obj: Any, *names: str) -> Any:
    """The object a framework's wrapper holds (``AcceleratedOptimizer.optimizer``, ...)."""
    for name in names:
        wrapped = getattr(obj, name, None)
        if wrapped is not None and wrapped is not obj:
            return wrapped
    return obj


def _tensors(batch: Any, depth: int = 0) -> Iterator[tuple[Any, Any]]:
    """The tensors of a batch: a tensor, a mapping, a sequence, or an object with them as attributes."""
    torch = sys.modules.get("torch")
    if torch is None or depth > 3:
        return
    if isinstance(batch, torch.Tensor):
        yield None, batch
    elif isinstance(batch, dict) or hasattr(batch, "items"):
        try:
            items = list(batch.items())
        except (TypeError, AttributeError):
            return
        for key, value in items:
            if isinstance(value, torch.Tensor):
                yield key, value
            else:
                yield from _tensors(value, depth + 1)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            yield from _tensors(value, depth + 1)


def token_tensor(batch: Any, name: str = "input_ids") -> Any:
    """The batch's token ids: ``name`` in a mapping, else its first integer tensor of two or more
    dimensions (micro-batch x sequence), else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    found = None
    for key, t in _tensors(batch):
        if t.dim() < 2 or t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            continue
        if key == name:
            return t
        if found is None:
            found = t
    return found


def batch_shape(batch: Any, name: str = "input_ids") -> tuple[int | None, int | None, int | None]:
    """(tokens, micro_batch, seq_len) of a batch of token ids, or (None, None, None)."""
    t = token_tensor(batch, name)
    if t is None:
        return None, None, None
    return t.numel(), t.shape[0], t.shape[-1]


def batch_digest(batch: Any, name: str = "input_ids") -> str | None:
    """A short fingerprint of a batch's token ids, computed where they lie (one number comes
    back): the shape, the sum and a position-weighted sum. None without token ids."""
    t = token_tensor(batch, name)
    if t is None:
        return None
    torch = sys.modules["torch"]
    flat = t.detach().reshape(-1).long()
    weights = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.long) % 65521
    both = torch.stack([flat.sum(), (flat * weights).sum()]).tolist()
    return "%s:%d:%d" % ("x".join(str(s) for s in t.shape), both[0], both[1])


def grad_norm(parameters: Iterable[Any]) -> Any:
    """The 2-norm of the gradients of ``parameters`` (a tensor on their device), or None."""
    torch = sys.modules.get("torch")
    grads = [p.grad for p in parameters if getattr(p, "grad", None) is not None]
    if torch is None or not grads:
        return None
    grads = [g.to_local() if hasattr(g, "to_local") else g for g in grads]  # a DTensor's shard
    foreach = getattr(torch, "_foreach_norm", None)
    norms = foreach(grads) if foreach is not None else [torch.linalg.vector_norm(g) for g in grads]
    dev = norms[0].device
    return torch.linalg.vector_norm(torch.stack([n.to(dev, torch.float32) for n in norms]))

