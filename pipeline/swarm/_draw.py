"""Drawing a swarm: its agents and the handoffs each may make (Mermaid)."""

from __future__ import annotations

from collections.abc import Mapping

from ..graph._draw import idents, label
from ._model import Member


def mermaid(entry: str, members: Mapping[str, Member]) -> str:
    """A Mermaid flowchart: one node per agent, one arrow per allowed handoff."""
    ids = idents(members)
    lines = ["flowchart LR", "  START([start])"]
    lines.extend(f"  {ids[n]}[{label(n)}]" for n in members)
    lines.append(f"  START --> {ids[entry]}")
    for m in members.values():
        lines.extend(
            f"  {ids[m.name]} -->|transfer| {ids[t]}" for t in m.handoffs
        )
    return "\n".join(lines) + "\n"
