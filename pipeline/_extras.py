"""Optional dependencies: a clear error when an extra is not installed."""

from __future__ import annotations

import importlib

from collections.abc import Sequence


def require(
    module: str, needs: str, extra: str, imports: Sequence[str]
) -> None:
    """Import *imports*; if one is missing, raise an :class:`ImportError`
    saying that *module* needs *needs* and how to install it (the extra
    *extra*)."""
    for name in imports:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            msg = f"{module} needs {needs} ({exc}): pip install 'pipeline[{extra}]'"
            raise ImportError(msg, name=exc.name) from exc
