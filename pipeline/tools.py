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

import functools
import inspect
import logging
import re
import typing

from collections.abc import (
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    final,
    overload,
)

import anyio
import anyio.to_thread
import attrs

from cattrs.errors import (
    CattrsError,
)
from typing_extensions import ParamSpec, TypeVar

from ._concurrency import run_all
from ._decode import (
    DECODE_ERRORS,
    JSON,
    MAX_DEPTH,
    explain,
    names,
    unsendable,
)
from ._depth import check_depth
from ._messages import Message, ToolCall
from ._schema import schema_for
from ._serde import canonical, make_converter, unicode_safe
from .errors import (
    ConstructionError,
    InvalidAnswer,
    MissingDeps,
    NestedTooDeeply,
    ToolError,
)
from .events import ToolRaised, emit, listening
from .models._types import ToolSpec
from .secrets import holds_secret, redact_arguments, redacted_traceback


if TYPE_CHECKING:
    from .runs import ToolHook


__all__ = (
    "MAX_ARGUMENT_BYTES",
    "MAX_ARGUMENT_DEPTH",
    "NO_DEPS",
    "ApprovingToolMaker",
    "NoDeps",
    "ToolMaker",
    "run_tools",
)

D_contra = TypeVar("D_contra", contravariant=True, default=Any)
P = ParamSpec("P", default=...)
R_co = TypeVar("R_co", covariant=True, default=Any)
Dx = TypeVar("Dx")
Q = ParamSpec("Q")
S = TypeVar("S")


@final
@attrs.frozen(repr=False)
class RunContext(Generic[Dx]):
    """What a tool's first parameter, annotated ``RunContext[Deps]``,
    receives: the run's dependencies (``deps``), given with
    ``agent.run(..., deps=...)`` or :meth:`~pipeline.Agent.with_deps`.

    The parameter is not in the tool's JSON schema (the model never sees
    it), and the dependencies are never checkpointed, traced or put in an
    event: a resumed run gets the ones it is resumed with.

    .. versionadded:: 0.1.0
    """

    deps: Dx

    def __repr__(self) -> str:  # never the dependencies themselves
        return f"RunContext({type(self.deps).__name__})"


@final
class NoDeps:
    """The type of :data:`NO_DEPS`: no dependencies were given.

    .. versionadded:: 0.1.0
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEPS"


NO_DEPS = NoDeps()
"""No dependencies given (a run's default)."""


MAX_ARGUMENT_BYTES = 1 << 20
"""Arguments larger than this (1 MiB of JSON) are refused unread."""

MAX_ARGUMENT_DEPTH = MAX_DEPTH
"""Arguments nested deeper than this (64 levels) are refused."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONVERTER = make_converter()


@final
@attrs.frozen
class Param:
    name: str
    annotation: Any
    required: bool
    default: Any


def _exception_types(
    kinds: Iterable[type[Exception]],
) -> tuple[type[Exception], ...]:
    return tuple(kinds)


@final
@attrs.frozen(repr=False)
class Tool(Generic[D_contra, P, R_co]):
    """A callable the model may ask for, with its JSON schema.

    Make one with :func:`tool`.  ``Tool[Deps, Params, Result]``: *Deps*
    is what the run must give it (a tool whose first parameter is a
    ``RunContext[Deps]``; ``object`` for a tool that takes none), and
    :attr:`fn` is the function, typed as written, for unit tests.  :meth:`call` returns ``(text, is_error)``
    for the model: bad arguments, a timeout, an exception listed in
    *errors* (its type only) or a :class:`~pipeline.errors.ToolError`
    (its message) or a result that cannot be sent all become error
    results.  Other exceptions propagate, and so does
    :class:`~pipeline.errors.InvalidAnswer` (a human's answer to the
    tool's :func:`pipeline.interrupt` that does not fit: the run asks
    again).

    .. versionadded:: 0.1.0
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    _fn: Callable[P, R_co] = attrs.field(alias="fn")
    _params: tuple[Param, ...] = attrs.field(alias="params")
    timeout: float | None = None
    errors: tuple[type[Exception], ...] = attrs.field(
        default=(Exception,), converter=_exception_types
    )
    takes_deps: bool = attrs.field(default=False, kw_only=True)
    """Whether the function's first parameter is a :class:`RunContext`."""
    approval: bool | Callable[..., bool] = attrs.field(
        default=False, kw_only=True, eq=False
    )
    """Which calls wait for a person's approval (see
    "Approving tool calls" in the agents guide): ``False`` none, ``True`` all, or a
    predicate given a call's decoded arguments (by keyword, defaults
    filled in) that returns whether this call does."""
    extra_arguments: bool = attrs.field(default=False, kw_only=True)
    """Whether arguments its parameters do not list are passed on as
    decoded JSON, for the function to check (an MCP tool whose schema
    declares ``additionalProperties`` or ``patternProperties``); by
    default they are refused."""
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
    _secret: Mapping[str, Any] = attrs.field(
        init=False,
        eq=False,
        default=attrs.Factory(
            lambda self: {
                p.name: p.annotation
                for p in self._params
                if holds_secret(p.annotation)
            },
            takes_self=True,
        ),
    )

    _told: tuple[frozenset[str], bool, str] | None = attrs.field(
        init=False, eq=False, default=None
    )
    """Its parameters' names and whether its function is a coroutine
    function, told at its first call and kept (see :meth:`_facts`)."""

    def __attrs_post_init__(self) -> None:
        for kind in self.errors:
            given: object = kind  # the annotation is a promise, not a check
            if not (isinstance(given, type) and issubclass(given, Exception)):
                msg = (
                    f"tool {self.name!r}: errors= takes Exception subclasses "
                    "(cancellation and other BaseExceptions always propagate)"
                )
                raise ConstructionError(msg)
        if self.timeout is not None and not self.timeout > 0:
            msg = f"tool {self.name!r}: timeout must be a positive number"
            raise ConstructionError(msg)
        chosen: object = self.approval
        if not (isinstance(chosen, bool) or callable(chosen)):
            msg = (
                f"tool {self.name!r}: approval= takes True, False or a "
                f"predicate of the arguments, not a {type(chosen).__name__}"
            )
            raise ConstructionError(msg)
        if inspect.iscoroutinefunction(chosen):
            msg = (
                f"tool {self.name!r}: approval= takes a plain function "
                "returning a bool (an async one would always ask)"
            )
            raise ConstructionError(msg)

    def __repr__(self) -> str:
        return f"Tool({self.name})"

    def _facts(self) -> tuple[frozenset[str], bool, str]:
        """Its parameters' names (every call's arguments are checked
        against them), whether its function is a coroutine function
        (awaited on the event loop; a plain one runs in a thread) and what
        its errors call its arguments: told
        once, at the first call, not on every call (the tool is frozen,
        so neither changes; a tool built and dropped per step pays
        nothing for them until called)."""
        told = self._told
        if told is None:
            told = (
                frozenset(p.name for p in self._params),
                inspect.iscoroutinefunction(self._fn),
                f"arguments for {self.name!r}",
            )
            object.__setattr__(self, "_told", told)
        return told

    def needs_approval(self, kwargs: Mapping[str, Any]) -> bool:
        """Whether the call with decoded arguments *kwargs* (see
        :meth:`decode`) waits for a person's approval (see
        :attr:`approval`).

        .. versionadded:: 0.1.0
        """
        approval = self.approval
        if approval is True or approval is False:
            return approval
        given = {p.name: kwargs.get(p.name, p.default) for p in self._params}
        return bool(approval(**given))

    @property
    def fn(self) -> Callable[P, R_co]:
        """The function the tool calls, typed as written, for unit tests
        (with a :class:`RunContext` first, if it takes one).

        .. versionadded:: 0.1.0
        """
        return self._fn

    @property
    def secret_arguments(self) -> frozenset[str]:
        """Parameters whose type holds a ``Secret[...]`` (see
        :mod:`pipeline.secrets`; ``Optional``, containers and attrs fields
        included): the function gets a :class:`~pipeline.Secret`
        there, and recorded calls show a reference instead of the value."""
        return frozenset(self._secret)

    def redact(self, arguments: str) -> str:
        """A call's *arguments* as recorded: every secret in them replaced
        by its reference (see :attr:`secret_arguments`); a call that does
        not decode, replaced whole (``{"$secret": "tool:<name>"}``).

        .. versionadded:: 0.1.0
        """
        if not self._secret:
            return arguments
        # A call that does not decode (a misspelt name: "Code" for code)
        # may hold its secret anywhere: nothing of it is kept.
        whole = isinstance(self.decode(arguments), str)
        return redact_arguments(
            self.name, arguments, self._secret, whole=whole
        )

    @property
    def spec(self) -> ToolSpec:
        """The tool as a model request lists it."""
        return self._spec

    def decode(self, arguments: str) -> dict[str, Any] | str:
        """Decoded keyword arguments, or an error text naming the field.

        The text never holds a value from *arguments*: only argument names,
        paths into them and the types expected.
        """
        return self._decoded(arguments, self._facts())

    def _decoded(
        self, arguments: str, told: tuple[frozenset[str], bool, str]
    ) -> dict[str, Any] | str:
        """:meth:`decode`, with what :meth:`_facts` tells (:meth:`call`
        has it at hand)."""
        known, _, where = told
        raw = _json_object(arguments, where)
        if isinstance(raw, str):
            return raw
        kwargs: dict[str, Any] = {}
        problems: list[str] = []
        if not known.issuperset(raw):  # some argument is not a parameter
            extra = [k for k in raw if k not in known]
            if not self.extra_arguments:
                return (
                    f"unknown argument(s) {names(extra)} for {self.name!r}; "
                    f"expected {sorted(known)}"
                )
            # Unlisted arguments (only with extra_arguments) go as they are.
            kwargs = {k: raw[k] for k in extra}
            if any(unsendable(raw[k]) is not None for k in extra):
                problems.append("an unlisted argument cannot be sent")
        for p in self._params:
            if p.name not in raw:
                if p.required:
                    problems.append(f"missing required argument {p.name!r}")
                continue
            value = raw[p.name]
            kind = type(value)
            if kind is p.annotation and (
                kind is int or (kind is str and value.isascii())
            ):
                # What the strict hook and `unsendable` answer for these.
                kwargs[p.name] = value
                continue
            problem = unsendable(value)
            if problem is None:
                try:
                    kwargs[p.name] = _CONVERTER.structure(value, p.annotation)
                except DECODE_ERRORS as exc:
                    problem = "; ".join(explain(exc, p.annotation))
            if problem is not None:
                problems.append(f"argument {p.name!r}: {problem}")
        if problems:
            return f"invalid {where}: " + "; ".join(problems)
        return kwargs

    async def call(
        self,
        arguments: str,
        deps: D_contra | NoDeps = NO_DEPS,
        *,
        malformed: Callable[[], object] | None = None,
    ) -> tuple[str, bool]:
        """Run the tool on the model's *arguments*: ``(content, is_error)``.

        *deps*, the run's dependencies, go to a tool that takes a
        :class:`RunContext`.  *malformed*, if given, is called when the
        arguments do not decode (the result is then the error for the
        model): budgets count such calls as repairs.

        .. versionchanged:: 0.1.0
           *malformed*.

        Raises:
            MissingDeps: the tool takes a :class:`RunContext` and *deps*
                were not given.
        """
        fn: Callable[..., Any] = self._fn
        if self.takes_deps:
            if isinstance(deps, NoDeps):
                raise MissingDeps(self.name)
            fn = functools.partial(fn, RunContext(deps))
        told = self._told or self._facts()  # told at the first call
        kwargs = self._decoded(arguments, told)
        if isinstance(kwargs, str):
            if malformed is not None:
                malformed()
            return f"error: {kwargs}", True
        try:
            if self.timeout is None:
                out = await (
                    fn(**kwargs)
                    if told[1]
                    else _in_thread(fn, kwargs, abandon=False)
                )
            else:
                out = _TIMED_OUT
                with anyio.move_on_after(self.timeout):
                    out = await (
                        fn(**kwargs)
                        if told[1]
                        else _in_thread(fn, kwargs, abandon=True)
                    )
                if out is _TIMED_OUT:
                    late = (
                        f"tool {self.name!r} timed out after {self.timeout} s"
                    )
                    return f"error: {late}", True
        except InvalidAnswer:
            # A human's answer to the tool's interrupt() does not fit: the
            # run asks again (never an error result the model talks past).
            raise
        except ToolError as exc:  # meant for the model, whatever *errors* says
            _LOG.info("tool %r refused: %s", self.name, type(exc).__name__)
            return f"error: {unicode_safe(str(exc))}", True
        except self.errors as exc:
            return await self._raised(exc), True
        rendered = _render(out)
        if rendered is None:
            _LOG.error(
                "tool %r returned a %s, which has no JSON form",
                self.name,
                type(out).__name__,
            )
            unsent = (
                f"tool {self.name!r} returned a value that cannot be sent "
                "to the model"
            )
            return f"error: {unsent}", True
        return rendered, False

    async def _raised(self, exc: Exception) -> str:
        # A tool's own exception may be a bug: never silent, never echoed
        # (its text may hold a secret).
        # Frames and types only: the record's traceback would quote the
        # message (and a handler without one, e.g. logging's last resort,
        # would print it).
        _LOG.error(
            "tool %r raised %s\n%s",
            self.name,
            type(exc).__name__,
            redacted_traceback(exc),
        )
        if listening():
            await emit(ToolRaised(self.name, type(exc)))
        return (
            f"error: tool {self.name!r} raised {type(exc).__name__}; "
            "the tool failed, and its details were logged"
        )


async def _in_thread(
    fn: Callable[..., Any], kwargs: dict[str, Any], *, abandon: bool
) -> Any:
    # A plain function may block: keep it off the event loop.  Under a
    # timeout its thread is abandoned when the time is up (a thread
    # cannot be stopped: it runs on, and its result is dropped).
    return await anyio.to_thread.run_sync(
        functools.partial(fn, **kwargs), abandon_on_cancel=abandon
    )


_TIMED_OUT: Any = object()
_LOG = logging.getLogger("pipeline.tools")


def _render(out: object) -> str | None:
    """The tool's result as text for the model (``None``: it has none)."""
    if isinstance(out, str):
        return out if out.isascii() else unicode_safe(out)
    try:
        return canonical(_CONVERTER.unstructure(out)).decode()
    except (ValueError, TypeError, RecursionError, CattrsError):
        return None


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


@final
class ToolMaker:
    """What ``@tool(name=..., ...)`` returns: apply it to the function.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[Callable[..., Any]], Tool]) -> None:
        self._make = make

    @overload
    def __call__(
        self, fn: Callable[Concatenate[RunContext[Dx], Q], S], /
    ) -> Tool[Dx, Concatenate[RunContext[Dx], Q], S]: ...
    @overload
    def __call__(self, fn: Callable[Q, S], /) -> Tool[object, Q, S]: ...
    def __call__(self, fn: Callable[..., Any], /) -> Tool:
        return self._make(fn)


@final
class ApprovingToolMaker(Generic[Q]):
    """What ``@tool(approval=predicate)`` returns: apply it to a function
    whose parameters (after a :class:`RunContext`, if any) the predicate
    takes, so a predicate that does not fit the tool is a type error.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[Callable[..., Any]], Tool]) -> None:
        self._make = make

    @overload
    def __call__(
        self, fn: Callable[Concatenate[RunContext[Dx], Q], S], /
    ) -> Tool[Dx, Concatenate[RunContext[Dx], Q], S]: ...
    @overload
    def __call__(self, fn: Callable[Q, S], /) -> Tool[object, Q, S]: ...
    def __call__(self, fn: Callable[..., Any], /) -> Tool:
        return self._make(fn)


@overload
def tool(
    fn: Callable[Concatenate[RunContext[Dx], Q], S], /
) -> Tool[Dx, Concatenate[RunContext[Dx], Q], S]: ...
@overload
def tool(fn: Callable[Q, S], /) -> Tool[object, Q, S]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    errors: Sequence[type[Exception]] = (Exception,),
    approval: bool = False,
) -> ToolMaker: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    errors: Sequence[type[Exception]] = (Exception,),
    approval: Callable[Q, bool],
) -> ApprovingToolMaker[Q]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    errors: Sequence[type[Exception]] = (Exception,),
    approval: bool | Callable[..., bool] = False,
) -> Tool | ToolMaker | ApprovingToolMaker[...]:
    """Make a :class:`Tool` from a typed function (sync or async).

    Parameters become the schema's properties (required unless they have a
    default); the docstring's summary is the description and its ``Args:``
    section describes the parameters.

    *timeout* (seconds) bounds each call, sync functions included: those
    run in a worker thread, which is abandoned when the time is up (it runs
    on in the background; its result is dropped).  *errors* are the
    exception types that become an error result for the model (default:
    every :class:`Exception`); others propagate out of the agent's run.  An
    exception's text is never shown to the model, logged or put in an
    event (only its type; the traceback, messages withheld, is logged on
    the ``pipeline.tools`` logger and a
    :class:`~pipeline.events.ToolRaised` event is emitted), except a
    :class:`~pipeline.errors.ToolError`'s, which is meant for it (and
    always becomes an error result, listed or not).

    *approval* makes calls wait for a person (see
    "Approving tool calls" in the agents guide): ``True`` every call, or a predicate given
    a call's decoded arguments by keyword (the function's parameters
    after a :class:`RunContext`, defaults filled in) that says whether
    this one does: ``approval=lambda amount: amount > 100``.  The model's
    call becomes a question of the checkpointed run, answered with
    :class:`~pipeline.Approve` or
    :class:`~pipeline.Deny`.

    A first parameter annotated ``RunContext[Deps]`` receives the run's
    dependencies (see :class:`RunContext`); it is not in the schema, and
    the tool is a ``Tool[Deps, ...]``, which only an agent made with
    ``deps_type=Deps`` accepts.  The function stays callable as
    :attr:`Tool.fn`, typed as written.

    Raises:
        ConstructionError: a parameter has no annotation or a type with no
            JSON schema, the name is not 1-64 letters, digits, ``_``, ``-``,
            *timeout* is not positive or *errors* lists something that is
            not an :class:`Exception` subclass, or *approval* is neither a
            bool nor a plain (not async) callable.

    .. versionadded:: 0.1.0
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
        params: list[Param] = []
        props: dict[str, Any] = {}
        required: list[str] = []
        signature = list(inspect.signature(f).parameters.values())
        takes_deps = bool(signature) and _is_context(
            hints.get(signature[0].name)
        )
        if takes_deps:
            signature = signature[1:]
        for p in signature:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                msg = f"tool {label!r}: *args/**kwargs cannot be described to a model"
                raise ConstructionError(msg)
            if p.name not in hints:
                msg = f"tool {label!r}: parameter {p.name!r} needs a type annotation"
                raise ConstructionError(msg)
            annotation = hints[p.name]
            if _is_context(annotation):
                msg = (
                    f"tool {label!r}: a RunContext parameter must come "
                    f"first ({p.name!r} does not)"
                )
                raise ConstructionError(msg)
            prop = schema_for(annotation)
            if p.name in arg_docs:
                prop = {**prop, "description": arg_docs[p.name]}
            props[p.name] = prop
            is_required = p.default is inspect.Parameter.empty
            if is_required:
                required.append(p.name)
            params.append(Param(p.name, annotation, is_required, p.default))
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
            tuple(errors),
            takes_deps=takes_deps,
            approval=approval,
        )

    if fn is None:
        if approval is True or approval is False:
            return ToolMaker(make)
        return ApprovingToolMaker(make)
    return make(fn)


def _is_context(annotation: object) -> bool:
    return annotation is RunContext or typing.get_origin(annotation) is (
        RunContext
    )


def _unknown_tool(tools: Iterable[str]) -> str:
    """The error result for a call to a tool that is not there: the tools
    that are, never the name the model wrote (it may be anything, at any
    length: the model's own call still shows it)."""
    return f"error: unknown tool; available: {sorted(tools)}"


async def run_tools(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    *,
    on_result: Callable[[ToolCall, str, bool], Awaitable[None]] | None = None,
    agent: str | None = None,
    around: ToolHook | None = None,
    limit: int | None = None,
    deps: object = NO_DEPS,
    malformed: Callable[[ToolCall], object] | None = None,
) -> tuple[Message, ...]:
    """Run *calls* concurrently; tool messages come back in call order,
    tagged with *agent* (the agent whose calls they answer).  With *limit*,
    at most that many run at once (the others wait their turn, in call
    order); ``None`` runs them all at once.

    An unknown tool, bad arguments, a listed exception or a timeout becomes
    an error result (``error: ...``) for the model; cancellation and the
    exceptions a tool does not list propagate.
    *around*, if given, runs each call (a tracing span around it).
    *deps*, the run's dependencies, go to the tools that take a
    :class:`RunContext`.  *malformed*, if given, is called with each call
    to an unknown tool or with arguments that do not decode.

    .. versionadded:: 0.1.0
    """
    if not calls:
        return ()
    if len(calls) == 1:  # the common case: nothing to gather
        return (
            await _answer(
                calls[0], tools, agent, around, deps, malformed, on_result
            ),
        )
    results: list[Message | None] = [None] * len(calls)

    async def one(i: int, call: ToolCall) -> None:
        results[i] = await _answer(
            call, tools, agent, around, deps, malformed, on_result
        )

    if limit == 1:
        for i, call in enumerate(calls):
            await one(i, call)
    elif limit is not None and limit < len(calls):
        slots = anyio.Semaphore(limit)

        async def bounded(i: int) -> None:
            async with slots:
                await one(i, calls[i])

        await run_all(len(calls), lambda i, _: bounded(i))
    else:
        # The shared kit, never a bare task group: it keeps a native
        # cancellation of the caller (see pipeline/_concurrency.py) and
        # raises a tool's stray cancellation instead of dropping results.
        await run_all(len(calls), lambda i, _: one(i, calls[i]))
    out = tuple(m for m in results if m is not None)
    assert len(out) == len(calls)  # noqa: S101  # run_all: every call finished
    return out


async def _answer(
    call: ToolCall,
    tools: Mapping[str, Tool],
    agent: str | None,
    around: ToolHook | None,
    deps: object,
    malformed: Callable[[ToolCall], object] | None,
    on_result: Callable[[ToolCall, str, bool], Awaitable[None]] | None,
) -> Message:
    """One call of :func:`run_tools`, answered: its tool message (told
    to *on_result* before it is returned)."""
    if around is None:
        content, failed = await _execute(call, tools, deps, malformed)
    else:
        content, failed = await around(
            call, lambda: _execute(call, tools, deps, malformed)
        )
    out = Message.tool(
        content, tool_call_id=call.id, name=call.name, agent=agent
    )
    if on_result is not None:
        await on_result(call, content, failed)
    return out


def _execute(
    call: ToolCall,
    tools: Mapping[str, Tool],
    deps: object,
    malformed: Callable[[ToolCall], object] | None,
) -> Awaitable[tuple[str, bool]]:
    """What runs *call*: its tool's :meth:`Tool.call` (not awaited here:
    one coroutine less per call), or the error result of an unknown tool."""
    found = tools.get(call.name)
    if found is None:
        if malformed is not None:
            malformed(call)
        return _ready((_unknown_tool(tools), True))
    if malformed is None:
        return found.call(call.arguments, deps)
    return found.call(
        call.arguments, deps, malformed=functools.partial(malformed, call)
    )


async def _ready(value: tuple[str, bool]) -> tuple[str, bool]:
    return value


def _json_object(arguments: str, where: str) -> dict[str, Any] | str:
    """A tool call's *arguments* decoded, if within the size and depth
    bounds and a JSON object; else an error text naming *where*."""
    if len(arguments) > MAX_ARGUMENT_BYTES or (
        not arguments.isascii()
        and len(arguments.encode("utf-8", "surrogatepass"))
        > MAX_ARGUMENT_BYTES
    ):
        return f"{where} exceed {MAX_ARGUMENT_BYTES} bytes"
    try:
        check_depth(arguments, where)
    except NestedTooDeeply as exc:
        return str(exc)
    raw: Any = None
    try:
        # What models send (an object, nothing around it), decoded without
        # the full decoder's scans for whitespace before and after it.
        raw, end = JSON.raw_decode(arguments)
    except ValueError:  # no JSON value where it starts: the full decoder's
        end = -1
    if end != len(arguments):  # whitespace around it, or more after it
        try:
            raw = JSON.decode(arguments or "{}")
        except ValueError:
            return f"{where} are not valid JSON"
    if not isinstance(raw, dict):
        return f"{where} must be a JSON object"
    return raw
