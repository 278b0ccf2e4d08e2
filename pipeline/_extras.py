"""Optional dependencies: a clear error when an extra is not installed."""

from __future__ import annotations

import importlib

from collections.abc import Sequence

from .errors import MissingExtra


DISTRIBUTION = "typed-pipeline"
"""The name on the package index (the import name is ``pipeline``)."""


def install_command(extra: str) -> str:
    """The command that installs *extra*: ``pip install
    'typed-pipeline[extra]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(
    module: str, needs: str, extra: str, imports: Sequence[str]
) -> None:
    """Import *imports*; if one is missing, raise
    :class:`~pipeline.errors.MissingExtra` (an :class:`ImportError`)
    saying, on one line, that *module* needs *needs* and how to install
    it (the extra *extra*)."""
    for name in imports:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            msg = f"{module} needs {needs} (missing: {exc.name or name}): {install_command(extra)}"
            raise MissingExtra(
                msg,
                extra=extra,
                command=install_command(extra),
                name=exc.name,
            ) from exc
