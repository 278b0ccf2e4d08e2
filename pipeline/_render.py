"""Rendering a drawing: Graphviz's ``dot`` program turns DOT text into SVG
or PNG (no Node, no browser, no network)."""

from __future__ import annotations

import shutil
import subprocess

from typing import Literal

from .errors import RendererUnavailable


Format = Literal["svg", "png"]
"""What :func:`render` writes."""

_INSTALL = (
    "install Graphviz (apt-get install graphviz, brew install graphviz, "
    "or https://graphviz.org/download/)"
)


def render(source: str, fmt: Format = "svg") -> bytes:
    """*source* (DOT text) rendered by ``dot`` as *fmt*.

    Raises :class:`~pipeline.errors.RendererUnavailable` when ``dot`` is
    not installed or fails (its own message, never the DOT text).
    """
    program = shutil.which("dot")
    if program is None:
        msg = f"drawing as {fmt} needs Graphviz's dot program: {_INSTALL}"
        raise RendererUnavailable(msg)
    done = subprocess.run(  # noqa: S603  # a fixed program, our arguments
        [program, f"-T{fmt}"],
        input=source.encode("utf-8"),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip()[:500]
        msg = f"dot failed (exit {done.returncode}) rendering {fmt}: {reason}"
        raise RendererUnavailable(msg)
    return done.stdout


def svg(source: str) -> str:
    """*source* (DOT text) as an SVG document."""
    return render(source, "svg").decode("utf-8")
