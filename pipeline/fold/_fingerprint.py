"""Fingerprints of a machine's shape, and what changed between two.

A fingerprint is ``<whole>/<part>=<digest>/...``: a 64-bit digest of the
whole shape (what equality is decided on), then a short digest of each
part (``entry``, ``version``, ``nodes``, ``edges`` for a graph; ``agents``
for a swarm), so that a refusal can say which parts changed.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._serde import canonical, checksum


__all__ = ("fingerprint", "same_shape")


def fingerprint(shape: Mapping[str, object]) -> str:
    """The fingerprint of *shape* (a JSON-shaped mapping of named parts).

    .. versionadded:: 0.1.0
    """
    # 64 bits: plenty to tell shapes apart, short in records.
    whole = checksum(canonical(dict(shape)))[:16]
    parts = "/".join(
        f"{name}={checksum(canonical(shape[name]))[:8]}"
        for name in sorted(shape)
    )
    return f"{whole}/{parts}"


def same_shape(stored: str, current: str) -> bool:
    """Whether two fingerprints describe the same shape.

    Decided on the whole digest, so a record written before the per-part
    digests existed still matches its graph.

    .. versionadded:: 0.1.0
    """
    return stored.partition("/")[0] == current.partition("/")[0]
