"""``MODULE:OBJECT``: finding what to run, and turning input into its type."""

from __future__ import annotations

import difflib
import importlib
import json
import sys

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast, final

import attrs
import cattrs

from .._depth import check_depth
from ..errors import MissingExtra, NestedTooDeeply
from ._exits import ExitCode, UserError


Kind: TypeAlias = Literal["graph", "swarm", "handler"]

_EXAMPLE = "pipeline run myapp.flows:support"


@final
@attrs.frozen
class Target:
    """A loaded ``MODULE:OBJECT``: a graph, a swarm or a handler."""

    ref: str
    kind: Kind
    obj: Any

    @property
    def converter(self) -> cattrs.Converter:
        """Structures input for the target and unstructures its output."""
        if self.kind == "handler":
            from ..fold import make_converter  # noqa: PLC0415

            return make_converter()
        return self.obj.codec.converter  # type: ignore[no-any-return]

    @property
    def takes_context(self) -> bool:
        """Whether the target's input is a :class:`~pipeline.Context`."""
        if self.kind == "swarm":
            return True
        from ..agents import Agent  # noqa: PLC0415

        return isinstance(self.obj, Agent)


def load(ref: str, *, traceback: bool = False) -> Target:
    """Import ``MODULE:OBJECT`` (``OBJECT`` may be dotted) and classify it.

    The current directory is put first on ``sys.path``, as ``python -m``
    does, so a project's own modules are found.
    """
    obj = load_object(ref, traceback=traceback)
    return Target(ref, _kind(ref, obj), obj)


def load_resolver(ref: str) -> Callable[[str], object]:
    """``--resolver MODULE:OBJECT``: a resolver (a function from a
    reference to its value) or a mapping of references to values (then
    ``env:`` references still come from the environment)."""
    from ..secrets import resolver  # noqa: PLC0415

    obj = load_object(ref)
    if isinstance(obj, Mapping):
        return resolver(obj)
    if callable(obj):
        return cast("Callable[[str], object]", obj)
    raise UserError(
        f"--resolver {ref} is a {type(obj).__name__}, not a resolver",
        hint="name a function from a reference to its value, or a mapping "
        "of references to values",
    )


def load_object(ref: str, *, traceback: bool = False) -> Any:
    """The value ``MODULE:OBJECT`` names (a mistake is a usage error)."""
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise UserError(
            f"expected MODULE:OBJECT, got {_quote(ref)}",
            hint=f"for example: {_EXAMPLE}",
        )
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and _is_prefix(exc.name, module_name):
            raise UserError(
                f"no module named {exc.name!r}",
                hint="run from your project's directory, or install it "
                "(the current directory is on the path)",
            ) from None
        if traceback:
            raise
        raise _import_failed(module_name, exc) from None
    except Exception as exc:
        if traceback:
            raise
        raise _import_failed(module_name, exc) from None
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UserError(
                f"module {module_name!r} has no attribute {attr_path!r}",
                hint="OBJECT names a value defined at the module's top level",
            ) from None
    return obj


def _kind(ref: str, obj: object) -> Kind:
    from .. import Handler  # noqa: PLC0415
    from ..graph._graph import Graph  # noqa: PLC0415
    from ..swarm._swarm import Swarm  # noqa: PLC0415

    if isinstance(obj, Graph):
        return "graph"
    if isinstance(obj, Swarm):
        return "swarm"
    if isinstance(obj, Handler):
        return "handler"
    raise UserError(
        f"{ref} is a {type(obj).__name__}, not a graph, swarm or handler",
        hint="point at a value built with graph.builder(), "
        "swarm.builder() or @handler",
    )


def _is_prefix(missing: str, wanted: str) -> bool:
    return wanted == missing or wanted.startswith(missing + ".")


def _import_failed(module_name: str, exc: BaseException) -> UserError:
    if isinstance(exc, MissingExtra):  # one line that says what to install
        return UserError(str(exc), code=ExitCode.UNAVAILABLE)
    return UserError(
        f"importing {module_name!r} raised {type(exc).__name__}",
        hint="pass --traceback to see where",
        code=ExitCode.FAILED,
    )


def _quote(text: str) -> str:
    # What the user typed may be anything: show its shape, not a long value.
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def read_json(text: str, what: str) -> object:
    """Parse *text* as JSON; ``@path`` reads the file at *path*.

    Errors name *what* and the position, never the text (it may hold a
    secret).
    """
    if text.startswith("@"):
        if not text[1:]:
            raise UserError(f"{what}: @ needs a file name", hint="@FILE")
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(
                f"{what}: no file {str(path)!r}",
                hint="@FILE reads JSON from FILE",
                code=ExitCode.NOT_FOUND,
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(
                f"{what}: cannot read {str(path)!r} ({type(exc).__name__})"
            ) from None
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno})",
            hint="strings need JSON quotes: --input '\"hello\"'; "
            "or pass @FILE",
        ) from None
    except UnfitJSON as exc:
        raise UserError(f"{what}: {exc}", hint=exc.hint) from None


@final
class UnfitJSON(ValueError):
    """JSON that parses but cannot be taken: NaN or Infinity, an integer
    longer than Python reads, nesting deeper than it can follow, a string
    with a lone surrogate (no UTF-8 form).  The message never quotes it."""

    def __init__(self, message: str, hint: str, *, nan: bool = False) -> None:
        super().__init__(message)
        self.hint = hint
        self.nan = nan  # NaN or Infinity: as an answer, that text


def parse_json(text: str) -> object:
    """Strict JSON: integers stay exact (the standard library, not orjson,
    which turns them into floats) up to Python's limit on digits; NaN,
    Infinity and strings with lone surrogates refused.

    Raises:
        json.JSONDecodeError: *text* is not JSON (with its position).
        UnfitJSON: it is, but not one this program can take.
    """
    try:
        check_depth(text, "it")
        value = json.loads(text, parse_constant=_refuse_constant)
        json.dumps(value, ensure_ascii=False).encode()  # has a UTF-8 form
    except (UnfitJSON, json.JSONDecodeError):
        raise
    except NestedTooDeeply as exc:
        msg = f"nests too deeply (more than {exc.limit} levels)"
        raise UnfitJSON(msg, f"{exc.limit} levels at most") from None
    except UnicodeEncodeError:
        msg = "has a string with a lone surrogate (no UTF-8 form)"
        raise UnfitJSON(msg, "pair each surrogate, or drop it") from None
    except ValueError:  # int("1" * 5000): over sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        msg = f"has an integer of more than {limit} digits"
        raise UnfitJSON(msg, "give it as a string") from None
    return value


def _refuse_constant(_: str) -> object:
    msg = "NaN and Infinity are not JSON numbers"
    raise UnfitJSON(msg, "give a number, or null", nan=True)


def structure_input(target: Target, value: object) -> object:
    """*value* (JSON) as the target's input type.

    A graph takes its state type (an object of its fields); a swarm or an
    agent takes a context (a string is one user message); any other
    handler takes the JSON value itself, or a context with ``--context``.
    """
    if target.kind == "graph":
        kind: Any = target.obj.state_type
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise UserError(
                f"--input for {target.ref} is an object of "
                f"{_type_name(kind)}'s fields, not {_json_kind(value)}",
                hint='for example: --input \'{"field": "value"}\'',
            )
        return _structure(target, value, kind, _type_name(kind))
    if target.takes_context:
        return as_context(target, value)
    return value


def as_context(target: Target, value: object) -> object:
    """A string as a context of one user message; an object as the
    context's fields (``messages``, ``metadata``)."""
    from .. import Context, Message  # noqa: PLC0415

    if isinstance(value, str):
        return Context.of(Message.user(value))
    if value is None:
        return Context()
    return _structure(target, value, Context, "a Context")


def _structure(target: Target, value: object, kind: Any, name: str) -> object:
    from cattrs.errors import BaseValidationError  # noqa: PLC0415

    from ..secrets import given_by_value  # noqa: PLC0415

    try:
        out = target.converter.structure(value, kind)
        where = given_by_value(out)
        if where is None:
            return out
        where = (
            f'{_BY_VALUE}: give its reference, {{"$secret": REF}} @ {where}'
        )
    except BaseValidationError as exc:
        where = "; ".join(
            cattrs.transform_error(exc, format_exception=_expected)
        )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        where = f"{type(exc).__name__} @ $"
    hint = f"give the fields of {name} as a JSON object"
    if UNRESOLVED in where:
        hint = RESOLVER_HINT
    elif _BY_VALUE in where:
        hint = BY_REFERENCE
    raise UserError(f"--input does not fit {name}: {where}", hint=hint)


UNRESOLVED = "cannot be resolved"
"""How a secret reference no resolver knows is described (by
:class:`~pipeline.errors.SecretUnresolved` too)."""

_BY_VALUE = "a secret, given by value"

RESOLVER_HINT = (
    "name a resolver that knows it: --resolver MODULE:OBJECT (or "
    "$PIPELINE_RESOLVER); env:NAME references need none"
)

BY_REFERENCE = (
    'a secret is given by reference, {"$secret": "env:NAME"} (from the '
    "environment) or one --resolver MODULE:OBJECT knows"
)


def _expected(exc: BaseException, kind: type | None) -> str:
    """One failure, without the value (it may be a secret)."""
    from ..errors import SecretUnresolved  # noqa: PLC0415

    if isinstance(exc, SecretUnresolved):
        return f"secret {exc.ref!r} {UNRESOLVED}"  # a reference, no value
    if isinstance(exc, KeyError):
        return "required field missing"
    extra = getattr(exc, "extra_fields", None)
    if extra:
        # A key is what the user typed: name it only when it is close to
        # a real field (a typo), never when it might be something else.
        cls = getattr(exc, "cl", None)
        known = (
            [f.name for f in attrs.fields(cls)]
            if isinstance(cls, type) and attrs.has(cls)
            else []
        )
        typos = [
            f"{key!r} (did you mean {near[0]!r}?)"
            for key in sorted(map(str, extra))
            if (near := difflib.get_close_matches(key, known, n=1))
        ]
        if len(typos) == len(extra):
            return f"unknown field(s) {', '.join(typos)}"
        return f"{len(extra)} unknown field(s); the fields: {', '.join(known)}"
    if kind is None:
        return type(exc).__name__
    return f"expected {_type_name(kind)}"


def _json_kind(value: object) -> str:
    """What JSON value *value* is, in words (never the value)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "null"


def _type_name(kind: Any) -> str:
    return getattr(kind, "__qualname__", None) or str(kind)
