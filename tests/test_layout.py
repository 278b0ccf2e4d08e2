"""One home per concept: the layout a newcomer reads stays that way."""

from __future__ import annotations

import ast
import graphlib
import importlib
import importlib.util
import inspect
import pkgutil
import re
import tomllib
import typing

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import pipeline

from pipeline import errors, events, failures, middleware
from pipeline.failures import PipelineError


ROOT = Path(pipeline.__file__).parent
SOURCES = sorted(ROOT.rglob("*.py"))
LAYOUT = ROOT.parent / "docs" / "layout.md"


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


def test_no_private_names_imported_across_modules() -> None:
    """No module imports another module's underscore names.

    Private *modules* are the package's own layout and may be imported;
    the private names inside them may not.
    """
    for path in SOURCES:
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


def test_no_unused_type_variables() -> None:
    """Every type variable a module defines is used in that module."""
    for path in SOURCES:
        tree = _tree(path)
        defined: list[str] = []
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id
                in {"TypeVar", "TypeVarTuple", "ParamSpec"}
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


# -- floors: the layering docs/layout.md states --------------------------------


def _module_of(path: Path) -> str:
    parts = ["pipeline", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_of(p): p for p in SOURCES}


def _unit(module: str) -> str:
    """The unit a floor holds: a subpackage whole, or a top-level module."""
    parts = module.split(".")
    if len(parts) > 1 and (ROOT / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def _imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports: at the top, inside
    functions and under ``if TYPE_CHECKING:`` alike."""
    found: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        out: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom):
                source = _source(node, path)
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    out.add(full if full in MODULES else source)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
        found[module] = {m for m in out if m in MODULES and m != module}
    return found


def _floors() -> dict[str, int]:
    """Unit -> floor, from the floors table of docs/layout.md."""
    floors: dict[str, int] = {}
    for row in re.finditer(
        r"^\| (\d+) \| [^|]+ \| (.+) \|$",
        LAYOUT.read_text(encoding="utf-8"),
        re.MULTILINE,
    ):
        for name in re.findall(r"`([\w.]+)`", row.group(2)):
            unit = "pipeline" if name == "pipeline" else f"pipeline.{name}"
            assert unit not in floors, f"{unit} is on two floors"
            floors[unit] = int(row.group(1))
    return floors


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of *graph* (node -> the nodes it imports), or none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_every_module_has_a_floor() -> None:
    """docs/layout.md gives every module (or its package) one floor."""
    floors = _floors()
    missing = sorted({_unit(m) for m in MODULES} - set(floors))
    assert not missing, f"add {missing} to the floors of docs/layout.md"
    gone = sorted(set(floors) - {_unit(m) for m in MODULES})
    assert not gone, f"docs/layout.md names modules that do not exist: {gone}"


def test_no_import_runs_up_a_floor() -> None:
    """A module imports only from its own floor and the floors below."""
    floors = _floors()
    for module, targets in _imports().items():
        for target in targets:
            here, there = floors[_unit(module)], floors[_unit(target)]
            assert there <= here, (
                f"{module} (floor {here}) imports {target} (floor {there})"
            )


def test_no_import_cycles_between_modules() -> None:
    """No two modules import each other, however indirectly."""
    assert _cycle(_imports()) == []


def test_no_import_cycles_between_packages() -> None:
    """Seen from afar (a subpackage as one unit) there are no cycles
    either: no package reaches into another that reaches back."""
    units: dict[str, set[str]] = {}
    for module, targets in _imports().items():
        mine = units.setdefault(_unit(module), set())
        mine.update(_unit(t) for t in targets if _unit(t) != _unit(module))
    assert _cycle(units) == []


@pytest.mark.parametrize("package", ["pipeline.fold", "pipeline.stores"])
def test_packages_keep_their_private_modules(package: str) -> None:
    """Nothing outside fold/ or stores/ imports their private modules:
    their neighbours use what the package's __init__ exports."""
    for module, targets in _imports().items():
        if module == package or module.startswith(f"{package}."):
            continue
        for target in targets:
            if target.startswith(f"{package}."):
                tail = target.removeprefix(f"{package}.")
                assert not tail.startswith("_"), f"{module} imports {target}"


def test_codec_knows_no_state_type() -> None:
    """The fold's codec is generic: it imports no machine's state type
    (not even Context: a type lays its own fields out)."""
    for name in ("_codec.py", "_plan.py"):
        tree = _tree(ROOT / "fold" / name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _source(node, ROOT / "fold" / name)
                assert not source.endswith(("_context", "swarm", "graph")), (
                    f"fold/{name} imports {source}"
                )


def _defined_here(module: object) -> list[type]:
    name = getattr(module, "__name__", "")
    return [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and obj.__module__ == name
    ]


def test_failure_values_and_exceptions_live_apart() -> None:
    """Failure values are defined in failures.py, exceptions in errors.py,
    and nowhere else; failures.py holds no exception, errors.py no failure.

    (The agent loop's private pause signal, a ``BaseException`` that never
    leaves the library, is not a failure; nor is the command line's
    ``UserError``, its exit signal: it carries the CLI's exit code.)
    """
    for cls in _defined_here(failures):
        assert issubclass(cls, PipelineError), cls
    for cls in _defined_here(errors):
        assert not issubclass(cls, PipelineError), cls
    for name in _modules():
        if name in {"pipeline.errors", "pipeline.failures"} or name.startswith(
            "pipeline.cli"
        ):
            continue
        module = importlib.import_module(name)
        for cls in _defined_here(module):
            if issubclass(cls, PipelineError):
                where = "failures.py"
            elif issubclass(cls, Exception) and not cls.__name__.startswith(
                "_"
            ):
                where = "errors.py"
            else:
                continue
            raise AssertionError(f"{name}.{cls.__name__} belongs in {where}")


def test_hierarchies_are_drawn() -> None:
    """Each of failures.py and errors.py draws its hierarchy in its
    docstring, and the drawing names every class the module exports."""
    for module in (failures, errors):
        doc = module.__doc__ or ""
        for name in module.__all__:
            if inspect.isclass(getattr(module, name)):
                assert re.search(rf"\b{name}\b", doc), (module.__name__, name)


def test_event_values_live_in_events() -> None:
    """Every member of the Event union is defined in pipeline.events."""
    for member in typing.get_args(events.Event):
        origin = typing.get_origin(member) or member
        assert origin.__module__ == "pipeline.events", origin


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
