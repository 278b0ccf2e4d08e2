"""One home per concept: the layout a newcomer reads stays that way."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import tomllib
import typing

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import pipeline

from pipeline import events, middleware
from pipeline.errors import PipelineError


ROOT = Path(pipeline.__file__).parent
SOURCES = sorted(ROOT.rglob("*.py"))


def _modules() -> list[str]:
    names = ["pipeline"]
    for info in pkgutil.walk_packages([str(ROOT)], "pipeline."):
        names.append(info.name)
    return names


def _tree(path: Path) -> ast.Module:
    # Parsed in a thread of its own: CPython 3.11's parser can report an
    # "AST constructor recursion depth mismatch" (gh-106905) when called
    # from a deep stack, as under pytest-cov; a fresh thread starts clean.
    # The check's counter is shared by the interpreter's threads (the
    # Temporal workers' sandboxes compile modules in threads of their own),
    # so a parse can also meet another thread's count: parse again.
    text = path.read_text(encoding="utf-8")
    for _ in range(9):
        try:
            with ThreadPoolExecutor(max_workers=1) as pool:
                return pool.submit(ast.parse, text, str(path)).result()
        except SystemError:
            continue
    return ast.parse(text, str(path))


def _package_of(path: Path) -> str:
    parts = ["pipeline", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1])


def _source(node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    relative = "." * node.level + (node.module or "")
    return importlib.util.resolve_name(relative, _package_of(path))


@pytest.mark.parametrize(
    "path", SOURCES, ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_private_names_imported_across_modules(path: Path) -> None:
    """No module imports another module's underscore names.

    Private *modules* are the package's own layout and may be imported;
    the private names inside them may not.
    """
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _source(node, path)
        for alias in node.names:
            name = alias.name
            if not name.startswith("_") or name.startswith("__"):
                continue
            spec = importlib.util.find_spec(f"{source}.{name}")
            assert spec is not None, (
                f"{path.relative_to(ROOT)} imports {name} from {source}"
            )


@pytest.mark.parametrize(
    "path", SOURCES, ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_unused_type_variables(path: Path) -> None:
    """Every type variable a module defines is used in that module."""
    tree = _tree(path)
    defined: list[str] = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in {"TypeVar", "TypeVarTuple", "ParamSpec"}
        ):
            defined.extend(
                t.id for t in node.targets if isinstance(t, ast.Name)
            )
    text = path.read_text(encoding="utf-8")
    used = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    for name in defined:
        # String annotations ("Par[In, Err, *Outs]") count as uses too.
        quoted = text.count(name) > 1 and any(
            name in s.value
            for s in ast.walk(tree)
            if isinstance(s, ast.Constant) and isinstance(s.value, str)
        )
        assert name in used or quoted, f"{path.name}: {name} is unused"


def _defined_here(module: object) -> list[type]:
    name = getattr(module, "__name__", "")
    return [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and obj.__module__ == name
    ]


@pytest.mark.parametrize("name", _modules())
def test_failure_types_live_in_errors(name: str) -> None:
    """Every failure value and exception class is defined in errors.py.

    (The agent loop's private pause signal, a ``BaseException`` that never
    leaves the library, is not a failure; nor is the command line's
    ``UserError``, its exit signal: it carries the CLI's exit code.)
    """
    if name == "pipeline.errors" or name.startswith("pipeline.cli"):
        return
    module = importlib.import_module(name)
    for cls in _defined_here(module):
        is_failure = issubclass(cls, PipelineError) or (
            issubclass(cls, Exception) and not cls.__name__.startswith("_")
        )
        assert not is_failure, f"{name}.{cls.__name__} belongs in errors.py"


@pytest.mark.parametrize("name", _modules())
def test_event_values_live_in_events(name: str) -> None:
    """Every member of the Event union is defined in pipeline.events."""
    for member in typing.get_args(events.Event):
        origin = typing.get_origin(member) or member
        assert origin.__module__ == "pipeline.events", origin
    if name == "pipeline.events":
        return
    module = importlib.import_module(name)
    members = {
        typing.get_origin(m) or m for m in typing.get_args(events.Event)
    }
    for cls in _defined_here(module):
        assert cls not in members, f"{name}.{cls.__name__} is an event"


def test_middleware_factories_return_public_types() -> None:
    """retry, timeout and log return classes exported by the module."""
    made = {
        middleware.retry: middleware.retry(2),
        middleware.timeout: middleware.timeout(1.0),
        middleware.log: middleware.log(),
    }
    for factory, value in made.items():
        returned = typing.get_type_hints(factory)["return"]
        assert not returned.__name__.startswith("_"), factory
        assert returned.__name__ in middleware.__all__, factory
        assert type(value) is returned


def test_lint_exceptions_are_scoped_to_files() -> None:
    """SLF001, C901, PLR0912 and PLR0915 are never ignored project-wide."""
    config = tomllib.loads(
        (ROOT.parent / "pyproject.toml").read_text(encoding="utf-8")
    )
    lint = config["tool"]["ruff"]["lint"]
    scoped = {"SLF001", "C901", "PLR0912", "PLR0915"}
    assert not scoped & set(lint["ignore"])
    per_file = lint["per-file-ignores"]
    for pattern, codes in per_file.items():
        if scoped & set(codes) and not pattern.startswith("tests/**"):
            assert "*" not in pattern, pattern
            assert (ROOT.parent / pattern).is_file(), pattern


def test_message_importers_do_not_need_the_context() -> None:
    """Modules that only need messages import them from _messages."""
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (
                node.module or ""
            ).endswith("_context"):
                names = {a.name for a in node.names}
                assert not names & {"Message", "Role", "ToolCall", "Usage"}, (
                    path
                )
