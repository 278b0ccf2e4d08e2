"""Optional dependencies: a clear error when an extra is not installed."""

from __future__ import annotations

import importlib

from collections.abc import Sequence


DISTRIBUTION = "typed-pipeline"
"""The name on the package index (the import name is ``pipeline``)."""


def install_command(extra: str) -> str:
    """The command that installs *extra*: ``pip install
    'typed-pipeline[extra]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class MissingExtra(ImportError):
    """An optional dependency is not installed: the message is one line
    ending with the command that installs it (:attr:`command`)."""

    def __init__(self, message: str, *, extra: str, name: str | None) -> None:
        super().__init__(message, name=name)
        self.extra = extra
        self.command = install_command(extra)


def require(
    module: str, needs: str, extra: str, imports: Sequence[str]
) -> None:
    """Import *imports*; if one is missing, raise :class:`MissingExtra` (an
    :class:`ImportError`) saying, on one line, that *module* needs *needs* and how to install it
    (the extra *extra*)."""
    for name in imports:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            msg = f"{module} needs {needs} (missing: {exc.name or name}): {install_command(extra)}"
            raise MissingExtra(msg, extra=extra, name=exc.name) from exc
