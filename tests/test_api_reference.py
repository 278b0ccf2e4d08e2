"""The API reference is complete: every public module is in docs/api.md,
and every public name (module, class, function, method, property,
constant, alias) has a docstring the reference shows."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from sphinx.pycode import ModuleAnalyzer

import pipeline


API = Path(__file__).resolve().parents[1] / "docs" / "api.md"
NOT_API = {"pipeline.__main__", "pipeline.demo"}  # entry points, not a library


def public_modules() -> list[str]:
    """Every module of the package whose dotted name has no private part."""
    found = ["pipeline"]
    for info in pkgutil.walk_packages(pipeline.__path__, "pipeline."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or info.name in NOT_API:
            continue
        found.append(info.name)
    return sorted(found)


@cache
def reference() -> dict[str, set[str]]:
    """``automodule`` directives in docs/api.md: module -> excluded names
    (absent: listed without ``:members:``)."""
    text = API.read_text(encoding="utf-8")
    out: dict[str, set[str]] = {}
    for block in re.split(r"(?=\.\. automodule::)", text):
        head = re.match(r"\.\. automodule:: ([\w.]+)", block)
        if head is None:
            continue
        excluded = re.search(r":exclude-members: (.+)", block)
        names = (
            {n.strip() for n in excluded.group(1).split(",")}
            if excluded
            else set()
        )
        out[head.group(1)] = names if ":members:" in block else {"*"}
    return out


@cache
def attribute_docs() -> frozenset[tuple[str, str]]:
    """(module, name) of every module-level or class-level assignment that
    has a docstring (``X = 1`` then ``\"\"\"...\"\"\"``), across the package."""
    docs: set[tuple[str, str]] = set()
    names = ["pipeline"] + [
        i.name for i in pkgutil.walk_packages(pipeline.__path__, "pipeline.")
    ]
    for name in names:
        analyzer = ModuleAnalyzer.for_module(name)
        for (scope, attr), lines in analyzer.find_attr_docs().items():
            if any(line.strip() for line in lines):
                docs.add((scope, attr))
    return frozenset(docs)


def documented_data(name: str, scope: str = "") -> bool:
    """Whether an assignment called *name* carries a docstring somewhere."""
    return (scope, name) in attribute_docs()


def own_doc(obj: object) -> str:
    """The object's own docstring (a class does not inherit its base's)."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__")
        return doc if isinstance(doc, str) else ""
    return inspect.getdoc(obj) or ""


def _members(cls: type) -> list[tuple[str, object]]:
    """Public methods and properties a class defines itself."""
    out: list[tuple[str, object]] = []
    for attr, value in vars(cls).items():
        if attr.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            out.append((attr, value.__func__))
        elif isinstance(value, property) or inspect.isfunction(value):
            out.append((attr, value))
    return out


def test_every_public_module_is_in_the_reference() -> None:
    """docs/api.md has an automodule for each public module, with members
    when it exports any."""
    ref = reference()
    for name in public_modules():
        module = importlib.import_module(name)
        assert name in ref, f"docs/api.md does not document {name}"
        assert own_doc(module), f"{name} has no module docstring"
        if getattr(module, "__all__", ()):
            assert "*" not in ref[name], (
                f"{name} needs :members: in docs/api.md"
            )


def _undocumented(name: str, module: ModuleType) -> list[str]:
    missing = []
    excluded = reference().get(name, set())
    for attr in module.__all__:
        if attr.startswith("__"):
            continue
        obj = getattr(module, attr)
        where = f"{name}.{attr}"
        if attr in excluded:
            # Re-exported: documented where another module lists it.
            homes = [
                m
                for m, ex in reference().items()
                if m != name
                and attr not in ex
                and "*" not in ex
                and any(
                    getattr(home, a, None) is obj
                    for home in [importlib.import_module(m)]
                    for a in getattr(home, "__all__", ())
                )
            ]
            if not homes:
                missing.append(
                    f"{where} (excluded, and documented nowhere else)"
                )
            continue
        if inspect.ismodule(obj):
            if obj.__name__ not in reference():
                missing.append(where)
        elif inspect.isclass(obj) or inspect.isroutine(obj):
            if not own_doc(obj):
                missing.append(where)
            if inspect.isclass(obj):
                missing.extend(
                    f"{where}.{m}"
                    for m, member in _members(obj)
                    if not (inspect.getdoc(member) or "").strip()
                    and not documented_data(m, obj.__qualname__)
                )
        elif not documented_data(attr):
            missing.append(f"{where} (a value: give it a docstring)")
    return missing


@pytest.mark.slow
@pytest.mark.parametrize("name", public_modules())
def test_every_public_name_is_documented(name: str) -> None:
    """Each name in a public module's __all__ has a docstring, and so has
    each public method and property of its classes."""
    module = importlib.import_module(name)
    missing = _undocumented(name, module)
    assert not missing, "undocumented:\n  " + "\n  ".join(missing)


def test_no_class_is_documented_twice() -> None:
    """A class re-exported by several documented modules is
    excluded from all but one (Sphinx refuses a duplicate description)."""
    homes: dict[int, list[str]] = {}
    for name, excluded in reference().items():
        if "*" in excluded:
            continue
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            # Classes: autodoc gives each its canonical (defining) name.
            if attr in excluded or not inspect.isclass(obj):
                continue
            homes.setdefault(id(obj), []).append(f"{name}.{attr}")
    twice = [places for places in homes.values() if len(places) > 1]
    assert not twice, f"documented twice: {twice}"
