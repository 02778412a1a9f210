"""Frozen dataclass objects made without their ``__init__``, where one is made per output line.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (it must get
past the class's own ``__setattr__``, which refuses): a step event's twelve fields took longer
to set than its line took to parse, and four such objects a line (the step, its output, its
record, the worker's progress) were a tenth of what 256 tasks stepping five times a second
cost the controller. :func:`maker` sets them all at once instead, into the
object's ``__dict__``, which is what the ``__init__`` ends with: the object compares, hashes,
prints, pickles and stays frozen exactly as one made by its class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def maker(cls: type[T]) -> Callable[..., T]:
    """A function that makes a ``cls`` from every one of its fields, by keyword (the caller
    names them all: no default is filled in). ``cls`` must be a frozen dataclass without
    ``__post_init__`` or ``__slots__`` (ValueError otherwise: its ``__init__`` does more)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or hasattr(cls, "__post_init__") or "__slots__" in vars(cls):
        raise ValueError(f"{cls.__name__} is not a frozen dataclass without __post_init__ or slots")
    new = object.__new__
    count = len(_names(cls))

    def make(**fields: Any) -> T:
        # A field added to the class but not to a caller would leave an object without it,
        # failing far from here: the count is checked (cheaply) on every call.
        if len(fields) != count:
            raise TypeError(f"{cls.__name__} needs all of {', '.join(_names(cls))}; got {', '.join(fields)}")
        made = new(cls)
        made.__dict__.update(fields)
        return made

    make.__doc__ = f"A {cls.__name__} from all its fields ({', '.join(_names(cls))})."
    return make


def _names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]
