"""Old import paths that still work for one release, with a warning.

A module that gave a name up lists where it went; its module
``__getattr__`` (:pep:`562`) finds the name there and warns with
:class:`DeprecationWarning`, naming the one path to use instead.
"""

from __future__ import annotations

import warnings

from collections.abc import Callable, Mapping
from importlib import import_module


def moved(
    module: str, homes: Mapping[str, str], *, depth: int = 2
) -> Callable[[str], object]:
    """A module ``__getattr__`` for *module*, whose old names *homes* maps
    to ``"new.module:Name"``; the warning points *depth* frames up (the
    user's line: 3 where another ``__getattr__`` calls this one)."""

    def __getattr__(name: str) -> object:  # noqa: N807
        home = homes.get(name)
        if home is None:
            msg = f"module {module!r} has no attribute {name!r}"
            raise AttributeError(msg)
        where, _, new = home.partition(":")
        warnings.warn(
            f"{module}.{name} moved: use {where}.{new}",
            DeprecationWarning,
            stacklevel=depth,
        )
        return getattr(import_module(where), new)

    return __getattr__


def homes(module: str, *names: str) -> dict[str, str]:
    """Old names that kept their name in *module*: ``{name: module:name}``."""
    return {name: f"{module}:{name}" for name in names}


FOLD_VALUES = (
    "Continue",
    "Decision",
    "Gate",
    "Interrupt",
    "Observer",
    "Snapshot",
    "Status",
    "Stop",
    "Transition",
)
"""The fold's values graph and swarm re-exported before (now pipeline.fold)."""

STORES = ("CheckpointStore", "MemoryStore", "SQLiteStore", "SignedStore")
"""The stores graph and swarm re-exported before (now pipeline.stores)."""
