"""The HTTP library's error base, whichever one the SDK uses.

The SDKs moved from ``httpx`` to its successor ``httpx2``; a stream that
drops mid-way raises that library's errors, not the SDK's.
"""

from __future__ import annotations

import importlib


def _transport_errors() -> tuple[type[Exception], ...]:
    found: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        error = getattr(module, "HTTPError", None)
        if isinstance(error, type) and issubclass(error, Exception):
            found.append(error)
    return tuple(found)


TRANSPORT_ERRORS = _transport_errors()
