"""The public surface: curated exports, final classes, the demo runs."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import warnings

from pathlib import Path

import pytest

import pipeline

from pipeline import Note, emit


def _public_modules() -> list[str]:
    """Every module whose dotted name has no private part (entry points
    aside): the list grows with the package, never by hand."""
    found = ["pipeline"]
    for info in pkgutil.walk_packages(pipeline.__path__, "pipeline."):
        parts = info.name.split(".")
        if (
            not any(p.startswith("_") for p in parts)
            and info.name != "pipeline.demo"
        ):
            found.append(info.name)
    return sorted(found)


PUBLIC_MODULES = _public_modules()

# Handler is subclassed by Par and Race (flat fan-out and race types);
# PipelineError is the base every failure value extends; Journal is where
# a fold commits, subclassed by engines that keep records elsewhere
# (pipeline.temporal sends them to a workflow); Runnable, MachineBase and
# Building are the bases of the folds users run (Graph, Swarm), their
# machines and their builders.
OPEN_CLASSES = {
    "Building",
    "Handler",
    "Journal",
    "MachineBase",
    "PipelineError",
    "Runnable",
}


# Helpers a public module shares with the rest of the package without
# offering them to users (their home is the tools work's call).
SHARED_INTERNALS = {
    "pipeline": {"TYPE_CHECKING"},  # typing's, without importing typing
    "pipeline.tools": {"Param"},
    "pipeline.agents": {"prompt_tool", "raise_for"},  # Graph.as_tool's
    "pipeline.budgets": {"Ledger"},
    "pipeline.runs": {
        "ToolHook",
        "current",
        "generate",
        "handoff",
        "traced_by_default",
        "tracing_now",
    },
    # The ambient values pipeline.fold.ambient reads once per run.
    "pipeline.events": {"current_gate", "current_sink"},
    "pipeline.secrets": {
        "current_resolver",
        "redact_arguments",
        "reset_resolver",
        "stored",
        "use_resolver",
    },
}


def _ruff_order(name: str) -> tuple[int, str]:
    # RUF022's "isort-style" order: CONSTANTS, then Classes, then the rest.
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _public_names(module: object) -> set[str]:
    """Names the module's own source defines or re-exports (``X as X``)."""
    path = Path(inspect.getfile(module))  # type: ignore[arg-type]
    names: set[str] = set()
    body = ast.parse(path.read_text(encoding="utf-8")).body
    # ``if TYPE_CHECKING:`` blocks too (pipeline/__init__.py's imports).
    nodes = [
        n
        for top in body
        for n in ([*top.body] if isinstance(top, ast.If) else [top])
    ]
    for node in nodes:
        if isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        ):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(
            node.target, ast.Name
        ):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update(a.name for a in node.names if a.asname == a.name)
    kinds = ("TypeVar", "TypeVarTuple", "ParamSpec")
    return {
        n
        for n in names
        if (not n.startswith("_") or n == "__version__")
        and type(getattr(module, n, None)).__name__ not in kinds
    }


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_a_tuple_of_defined_names(name: str) -> None:
    """Each public module's __all__ is a tuple of real attributes."""
    module = importlib.import_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr}"


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_without_duplicates(name: str) -> None:
    """__all__ is in ruff's isort-style order (RUF022), each name once."""
    exported = list(importlib.import_module(name).__all__)
    assert exported == sorted(set(exported), key=_ruff_order)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_name_is_exported(name: str) -> None:
    """A name a public module defines without an underscore is in __all__."""
    module = importlib.import_module(name)
    shared = SHARED_INTERNALS.get(name, set())
    at_top = {
        top
        for top, home in pipeline._HOMES.items()
        if importlib.import_module(home, "pipeline") is module
    }
    missing = _public_names(module) - set(module.__all__) - shared - at_top
    assert not missing, f"{name} defines but does not export {missing}"


def _exports() -> dict[int, list[str]]:
    """Every exported object, by identity: the paths it is exported at."""
    paths: dict[int, list[str]] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if isinstance(obj, type(pipeline)):  # a module: pipeline.errors
                continue
            if isinstance(obj, int | float | str | tuple):
                continue  # a constant: its value may equal another's
            paths.setdefault(id(obj), []).append(f"{name}.{attr}")
    return paths


def test_one_public_path_per_object() -> None:
    """No object is exported at two paths: each has one canonical import
    path (the names most code needs at the top level, the rest in the one
    module of their concept)."""
    twice = [p for p in _exports().values() if len(p) > 1]
    assert not twice, twice


def test_distinct_classes_have_distinct_names() -> None:
    """Two different public classes never share a name (GraphLimits and
    SwarmLimits, not two Limits)."""
    seen: dict[str, str] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            if not inspect.isclass(getattr(module, attr)):
                continue
            assert attr not in seen, f"{name}.{attr} and {seen[attr]}.{attr}"
            seen[attr] = name


def _moved() -> list[tuple[str, str, str]]:
    """(module, old name, "new.module:Name") of every deprecated path."""
    out = []
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for old, new in getattr(module, "_MOVED", {}).items():
            out.append((name, old, new))
    return out


@pytest.mark.parametrize(("module", "old", "new"), _moved())
def test_old_paths_warn_and_lead_to_the_one_path(
    module: str, old: str, new: str
) -> None:
    """An old path still gives the object, with a DeprecationWarning that
    names its one path; that path exports it, and the old module does not."""
    where, _, attr = new.partition(":")
    home = importlib.import_module(where)
    assert attr in home.__all__
    old_module = importlib.import_module(module)
    assert old not in old_module.__all__
    with pytest.warns(
        DeprecationWarning, match=re.escape(f"use {where}.{attr}") + "$"
    ):
        value = getattr(old_module, old)
    assert value is getattr(home, attr)


def test_unknown_names_are_still_errors() -> None:
    """The deprecation hooks do not swallow typos."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in PUBLIC_MODULES:
            module = importlib.import_module(name)
            with pytest.raises(AttributeError, match="no attribute"):
                module.not_a_name


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


def test_import_pipeline_loads_names_on_first_use() -> None:
    """``import pipeline`` loads no module of its own but the version (the
    command line starts fast); each name, on first use, is the object its
    module defines, and the type checkers' imports name the same homes."""
    code = (
        "import sys, pipeline; "
        "print(sorted(m for m in sys.modules if m.startswith('pipeline')))"
    )
    loaded = subprocess.run(  # noqa: S603  # our own interpreter
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert loaded.strip() == "['pipeline', 'pipeline._version']"
    homes = pipeline._HOMES
    assert set(homes) == set(pipeline.__all__) - {"__version__"}
    for name, home in homes.items():
        module = importlib.import_module(home, "pipeline")
        expected = module if home == f".{name}" else getattr(module, name)
        assert getattr(pipeline, name) is expected, name
    source = Path(inspect.getfile(pipeline)).read_text(encoding="utf-8")
    checked = {
        alias.name: f".{node.module}" if node.module else f".{alias.name}"
        for top in ast.parse(source).body
        if isinstance(top, ast.If)
        for node in top.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert checked == homes
    assert {*pipeline.__all__} <= set(dir(pipeline))


def test_note_is_exported_beside_emit() -> None:
    """pipeline exports Note with emit: the event your own handlers send."""

    assert pipeline.Note is Note
    assert pipeline.emit is emit


def test_version() -> None:
    """__version__ is available and looks like a version."""
    assert pipeline.__version__.count(".") == 2
    with pytest.raises(AttributeError):
        pipeline.not_a_name  # type: ignore[attr-defined]  # typos are caught


@pytest.mark.slow
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
    """pipeline version prints the version."""
    from pipeline.cli import main  # noqa: PLC0415

    assert main(["version"]) == 0


def _documented_objects() -> list[tuple[str, object]]:
    found: dict[int, tuple[str, object]] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            home = getattr(obj, "__module__", "") or ""
            if (
                inspect.isclass(obj) or inspect.isfunction(obj)
            ) and home.startswith("pipeline"):
                found[id(obj)] = (f"{name}.{attr}", obj)
    return sorted(found.values(), key=lambda pair: pair[0])


def test_versionadded_on_every_public_name() -> None:
    """Every public class and function says when it was added, or none do.

    The project's choice is *every*: a new public name without
    ``.. versionadded:: X.Y.Z`` at the end of its docstring fails here.
    """
    objects = _documented_objects()
    marked = {
        label
        for label, obj in objects
        if ".. versionadded::" in (inspect.getdoc(obj) or "")
    }
    if marked:
        unmarked = sorted({label for label, _ in objects} - marked)
        assert not unmarked, f"add '.. versionadded::' to {unmarked}"
