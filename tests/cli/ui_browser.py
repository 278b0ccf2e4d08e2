"""A real ``pipeline ui`` process and a real Chromium driven by Playwright,
for the browser tests and the UI benchmark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from playwright.sync_api import Browser


CHROMIUM_ENV = "PIPELINE_CHROMIUM"
"""A Chromium to drive (default: Debian's ``chromium``, else Playwright's
own download)."""


def chromium_path() -> str | None:
    """The Chromium executable to launch, or ``None`` for Playwright's."""
    return os.environ.get(CHROMIUM_ENV) or shutil.which("chromium")


@contextmanager
def browser() -> Iterator[Browser]:
    """A headless Chromium, closed at the end."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium_path())
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def serving(
    store: str, *args: str, cwd: Path, env: dict[str, str]
) -> Iterator[str]:
    """``pipeline ui --store STORE --port 0 ARGS`` running; its URL."""
    proc = subprocess.Popen(  # noqa: S603  # our own interpreter
        [
            sys.executable,
            "-m",
            "pipeline",
            "ui",
            "--store",
            store,
            "--port",
            "0",
            *args,
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once it listens
        if not line.startswith("pipeline ui: "):
            proc.kill()
            _, err = proc.communicate(timeout=30)
            msg = f"pipeline ui did not start: {line!r} {err!r}"
            raise RuntimeError(msg)
        yield line.removeprefix("pipeline ui: ").strip()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
