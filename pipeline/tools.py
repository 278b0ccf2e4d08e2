"""Tools from typed Python functions.

>>> @tool
... async def add(a: int, b: int = 0) -> int:
...     '''Add two numbers.
...
...     Args:
...         a: the first number
...         b: the second number
...     '''
...     return a + b
>>> add.parameters["required"]
['a']

The JSON schema comes from the annotations (attrs classes included) and the
docstring; arguments from a model are decoded strictly by cattrs: extra keys
or wrong types give an error result that names the field (and never echoes
the value), which the model sees and can correct.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, final, get_args, get_origin, overload

import anyio
import anyio.to_thread
import attrs
import cattrs

from pyrsistent import PVector

from ._context import Message, ToolCall
from ._handler import collapse
from ._serde import STRUCTURE_ERRORS, canonical, make_converter
from .errors import ConstructionError
from .models._types import ToolSpec


__all__ = ("MAX_ARGUMENT_BYTES", "Tool", "run_tools", "tool")

MAX_ARGUMENT_BYTES = 1 << 20
"""Arguments larger than this (1 MiB of JSON) are refused unread."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONVERTER = make_converter()


@final
@attrs.frozen
class _Param:
    name: str
    annotation: Any
    required: bool
    default: Any


@final
@attrs.frozen(repr=False)
class Tool:
    """A callable the model may ask for, with its JSON schema.

    Make one with :func:`tool`.  :meth:`call` never raises for bad input or
    a failing function: it returns ``(text, is_error)`` for the model.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    _fn: Callable[..., Any] = attrs.field(alias="fn")
    _params: tuple[_Param, ...] = attrs.field(alias="params")
    timeout: float | None = None
    _spec: ToolSpec = attrs.field(
        init=False,
        eq=False,
        default=attrs.Factory(
            lambda self: ToolSpec(
                self.name, self.description, self.parameters
            ),
            takes_self=True,
        ),
    )

    def __repr__(self) -> str:
        return f"Tool({self.name})"

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model request lists it."""
        return self._spec

    def decode(self, arguments: str) -> dict[str, Any] | str:
        """Decoded keyword arguments, or an error text naming the field."""
        if len(arguments.encode()) > MAX_ARGUMENT_BYTES:
            return f"arguments for {self.name!r} exceed {MAX_ARGUMENT_BYTES} bytes"
        try:
            raw = json.loads(arguments or "{}")
        except (ValueError, RecursionError):
            return f"arguments for {self.name!r} are not valid JSON"
        if not isinstance(raw, dict):
            return f"arguments for {self.name!r} must be a JSON object"
        known = {p.name for p in self._params}
        extra = sorted(k for k in raw if k not in known)
        if extra:
            return f"unknown argument(s) {extra} for {self.name!r}; expected {sorted(known)}"
        kwargs: dict[str, Any] = {}
        problems: list[str] = []
        for p in self._params:
            if p.name not in raw:
                if p.required:
                    problems.append(f"missing required argument {p.name!r}")
                continue
            try:
                kwargs[p.name] = _CONVERTER.structure(
                    raw[p.name], p.annotation
                )
            except STRUCTURE_ERRORS as exc:
                problems.append(
                    f"argument {p.name!r}: {_explain(exc, p.annotation)}"
                )
        if problems:
            return f"invalid arguments for {self.name!r}: " + "; ".join(
                problems
            )
        return kwargs

    async def call(self, arguments: str) -> tuple[str, bool]:
        """Run the tool on the model's *arguments*: ``(content, is_error)``."""
        kwargs = self.decode(arguments)
        if isinstance(kwargs, str):
            return f"error: {kwargs}", True
        try:
            if self.timeout is None:
                out = await self._invoke(kwargs)
            else:
                out = _TIMED_OUT
                with anyio.move_on_after(self.timeout):
                    out = await self._invoke(kwargs)
                if out is _TIMED_OUT:
                    return (
                        f"error: tool {self.name!r} timed out after {self.timeout} s",
                        True,
                    )
        except Exception as exc:  # noqa: BLE001  # the model sees it; the loop goes on
            return (
                f"error: tool {self.name!r} raised {type(exc).__name__}: {exc}",
                True,
            )
        return _render(out), False

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(self._fn):
            return await self._fn(**kwargs)
        # A plain function may block: keep it off the event loop.
        return await anyio.to_thread.run_sync(lambda: self._fn(**kwargs))


_TIMED_OUT: Any = object()


def _render(out: object) -> str:
    if isinstance(out, str):
        return out
    return canonical(_CONVERTER.unstructure(out)).decode()


def _explain(exc: BaseException, annotation: Any) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc, path="value"))
    return f"expected {_type_name(annotation)}"


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


# -- schemas -------------------------------------------------------------------


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """Summary and per-argument descriptions from a Google-style docstring."""
    doc = inspect.getdoc(fn) or ""
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section = None
    current = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in {"Args:", "Arguments:", "Parameters:"}:
            section = "args"
            continue
        if stripped.endswith(":") and stripped[:-1] in {
            "Returns",
            "Raises",
            "Yields",
            "Examples",
            "Example",
            "Note",
        }:
            section = "other"
            continue
        if section is None:
            summary_lines.append(line)
        elif section == "args" and stripped:
            m = re.match(r"^(\w+)\s*(\([^)]*\))?:\s*(.*)$", stripped)
            if (
                m
                and line.startswith(("    ", "\t"))
                and not line.startswith(("        ", "\t\t"))
            ):
                current = m.group(1)
                args[current] = m.group(3)
            elif current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
    summary = " ".join(" ".join(summary_lines).split())
    return summary, args


def schema_for(t: Any) -> dict[str, Any]:
    """JSON schema of a Python type: scalars, containers, Literal, Enum,
    unions, attrs classes."""
    if t is Any or t is object:
        return {}
    if t is type(None) or t is None:
        return {"type": "null"}
    if t is bool:
        return {"type": "boolean"}
    if t is int:
        return {"type": "integer"}
    if t is float:
        return {"type": "number"}
    if t is str:
        return {"type": "string"}
    origin = get_origin(t)
    args = get_args(t)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_for(a) for a in args]}
    if origin in (
        list,
        tuple,
        set,
        frozenset,
        Sequence,
        typing.Sequence,
        PVector,
    ) or t in (list, tuple, PVector):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {
                "type": "array",
                "prefixItems": [schema_for(a) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        item = args[0] if args else Any
        return {"type": "array", "items": schema_for(item)}
    if origin in (dict, Mapping, typing.Mapping) or t is dict:
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": schema_for(value)}
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return {"enum": [m.value for m in t]}
    if isinstance(t, type) and attrs.has(t):
        hints = typing.get_type_hints(t)
        props: dict[str, Any] = {}
        required: list[str] = []
        for f in attrs.fields(t):
            props[f.name] = schema_for(hints.get(f.name, Any))
            if f.default is attrs.NOTHING:
                required.append(f.name)
        out: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }
        doc = inspect.getdoc(t)
        if doc and not doc.startswith(f"{t.__name__}("):
            out["description"] = doc.split("\n\n")[0]
        return out
    msg = f"no JSON schema for type {t!r}"
    raise ConstructionError(msg)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a typed function (sync or async).

    Parameters become the schema's properties (required unless they have a
    default); the docstring's summary is the description and its ``Args:``
    section describes the parameters.  *timeout* bounds each call.

    Raises:
        ConstructionError: a parameter has no annotation or a type with no
            JSON schema, or the name is not 1-64 letters, digits, ``_``, ``-``.
    """

    def make(f: Callable[..., Any]) -> Tool:
        label = name or str(getattr(f, "__name__", ""))
        if not _NAME.fullmatch(label):
            msg = (
                f"tool name {label!r} must be 1-64 letters, digits, '_' or '-'"
            )
            raise ConstructionError(msg)
        hints = typing.get_type_hints(f)
        summary, arg_docs = _docstring(f)
        params: list[_Param] = []
        props: dict[str, Any] = {}
        required: list[str] = []
        for p in inspect.signature(f).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                msg = f"tool {label!r}: *args/**kwargs cannot be described to a model"
                raise ConstructionError(msg)
            if p.name not in hints:
                msg = f"tool {label!r}: parameter {p.name!r} needs a type annotation"
                raise ConstructionError(msg)
            annotation = hints[p.name]
            prop = schema_for(annotation)
            if p.name in arg_docs:
                prop = {**prop, "description": arg_docs[p.name]}
            props[p.name] = prop
            is_required = p.default is inspect.Parameter.empty
            if is_required:
                required.append(p.name)
            params.append(_Param(p.name, annotation, is_required, p.default))
        schema = {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }
        return Tool(
            label,
            description or summary or label,
            schema,
            f,
            tuple(params),
            timeout,
        )

    if fn is None:
        return make
    return make(fn)


async def run_tools(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    *,
    on_result: Callable[[ToolCall, str, bool], Awaitable[None]] | None = None,
) -> tuple[Message, ...]:
    """Run *calls* concurrently; tool messages come back in call order.

    An unknown tool, bad arguments, an exception or a timeout becomes an
    error result (``error: ...``) for the model; cancellation propagates.
    """
    if not calls:
        return ()
    results: list[Message | None] = [None] * len(calls)

    async def one(i: int, call: ToolCall) -> None:
        found = tools.get(call.name)
        if found is None:
            content = f"error: unknown tool {call.name!r}; available: {sorted(tools)}"
            failed = True
        else:
            content, failed = await found.call(call.arguments)
        results[i] = Message.tool(
            content, tool_call_id=call.id, name=call.name
        )
        if on_result is not None:
            await on_result(call, content, failed)

    if len(calls) == 1:
        await one(0, calls[0])
    else:
        try:
            async with anyio.create_task_group() as tg:
                for i, call in enumerate(calls):
                    tg.start_soon(one, i, call)
        except BaseExceptionGroup as group:
            raise collapse(group) from None
    return tuple(m for m in results if m is not None)
