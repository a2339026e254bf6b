"""What the framework integrations share (slurm_pilot.loop, .hf, .lightning).

Standard library and torch only; nothing here imports a framework.
"""

import sys

import slurm_pilot
from slurm_pilot import _state
from slurm_pilot._util import env_int


def warn(message):
    """One line on standard error, once per message and process."""
    if message not in _state.warned:
        _state.warned.add(message)
        print("slurm_pilot: " + message, file=sys.stderr, flush=True)


def rank():
    return env_int("RANK") or 0


def world_size():
    return env_int("WORLD_SIZE") or 1


def fingerprints():
    """True when the probe has saved() and restored(step, **state) (the state's fingerprints)."""
    return getattr(slurm_pilot, "saved", None) is not None


def saved(step, **state):
    """slurm_pilot.saved() where the probe has it: the state of the checkpoint of ``step``."""
    fn = getattr(slurm_pilot, "saved", None)
    if fn is not None:
        fn(step, **{k: v for k, v in state.items() if v is not None})


def restored(step, **state):
    """slurm_pilot.restored(): with the state where the probe fingerprints it, else the step only."""
    if fingerprints():
        slurm_pilot.restored(step, **{k: v for k, v in state.items() if v is not None})
    else:
        slurm_pilot.restored(step)


def inner(obj, *names):
    """The object a framework's wrapper holds (``AcceleratedOptimizer.optimizer``, ...)."""
    for name in names:
        wrapped = getattr(obj, name, None)
        if wrapped is not None and wrapped is not obj:
            return wrapped
    return obj


def _tensors(batch, depth=0):
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


def token_tensor(batch, name="input_ids"):
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


def batch_shape(batch, name="input_ids"):
    """(tokens, micro_batch, seq_len) of a batch of token ids, or (None, None, None)."""
    t = token_tensor(batch, name)
    if t is None:
        return None, None, None
    return t.numel(), t.shape[0], t.shape[-1]


def batch_digest(batch, name="input_ids"):
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


def grad_norm(parameters):
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

