"""Small helpers every module of the probe uses."""

from __future__ import annotations

import os
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def env_int(name: str) -> int | None:
    """The environment variable ``name`` as an integer, or None."""
    value = os.environ.get(name, "")
    try:
        return int(value)
    except ValueError:
        return None


def guard(f: Callable[[], T]) -> T | None:
    """f(), or None where it raises: the probe's work never fails the program."""
    try:
        return f()
    except Exception:
        return None


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def number(value: Any) -> int | float | None:
    """A tensor or number as a Python number (a one-element tensor via .item())."""
    if value is None:
        return None
    item = getattr(value, "item", None)
    if item is not None:
        value = item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return float(value)
