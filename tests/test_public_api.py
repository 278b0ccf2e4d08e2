"""The public surface: curated exports, final classes, the demo runs."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys

import pytest

import pipeline


PUBLIC_MODULES = [
    "pipeline",
    "pipeline.agents",
    "pipeline.budgets",
    "pipeline.cli",
    "pipeline.errors",
    "pipeline.events",
    "pipeline.fold",
    "pipeline.graph",
    "pipeline.history",
    "pipeline.llm",
    "pipeline.middleware",
    "pipeline.models",
    "pipeline.models.anthropic",
    "pipeline.models.openai",
    "pipeline.runs",
    "pipeline.secrets",
    "pipeline.stores",
    "pipeline.stores.postgres",
    "pipeline.stores.redis",
    "pipeline.temporal",
    "pipeline.testing",
    "pipeline.tools",
    "pipeline.typing",
]

# Handler is subclassed by Par and Race (flat fan-out and race types);
# PipelineError is the base every failure value extends; Journal is where
# a fold commits, subclassed by engines that keep records elsewhere
# (pipeline.temporal sends them to a workflow).
OPEN_CLASSES = {"Handler", "Journal", "PipelineError"}


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_a_tuple_of_defined_names(name: str) -> None:
    """Each public module's __all__ is a sorted tuple of real attributes."""
    module = importlib.import_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr}"


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_classes_are_final(name: str) -> None:
    """Concrete public classes are @final, except protocols and bases."""
    module = importlib.import_module(name)
    for attr in module.__all__:
        obj = getattr(module, attr)
        if not inspect.isclass(obj) or attr in OPEN_CLASSES:
            continue
        if getattr(obj, "_is_protocol", False) or issubclass(
            obj, BaseException
        ):
            continue
        assert getattr(obj, "__final__", False), f"{name}.{attr} is not @final"


def test_version() -> None:
    """__version__ is available and looks like a version."""
    assert pipeline.__version__.count(".") == 2
    with pytest.raises(AttributeError):
        pipeline.not_a_name  # type: ignore[attr-defined]  # typos are caught


def test_demo_runs_offline() -> None:
    """python -m pipeline demo succeeds and shows both routes."""
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", "demo"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "[billing]" in out.stdout
    assert "[tech]" in out.stdout
    assert "at parse_amount" in out.stdout
    assert re.search(r"paused at v\d+: Issue the refund\?", out.stdout)
    assert "resumed to done: topic='billing', approved=True" in out.stdout


def test_cli_version() -> None:
    """python -m pipeline version prints the version."""
    from pipeline.__main__ import main  # noqa: PLC0415

    assert main(["version"]) == 0
